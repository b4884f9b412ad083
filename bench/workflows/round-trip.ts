/**
 * The minimal Temporal round trip the session turn is compared with: a workflow that runs one
 * activity and returns its result.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { RoundTripActivities } from '../support/round-trip-activities.js';

const { echo } = proxyActivities<RoundTripActivities>({ startToCloseTimeout: '30s' });

export async function roundTripWorkflow(text: string): Promise<string> {
  return echo(text);
}
