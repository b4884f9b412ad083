/**
 * Opens a payload of a session workflow's history as the session's client does: through its
 * codecs (the session codec unseals it with the session's key), then its payload converter.
 */
import type { Client } from '@temporalio/client';
import type { Payload } from '@temporalio/common';

export async function openPayload<T>(temporal: Client, workflowId: string, payload: Payload): Promise<T> {
  const converter = temporal.options.loadedDataConverter;
  const context = { type: 'workflow' as const, namespace: temporal.options.namespace, workflowId };
  let opened = payload;
  for (const codec of [...converter.payloadCodecs].reverse())
    [opened] = (await codec.decode([opened], context)) as [Payload];
  return converter.payloadConverter.fromPayload<T>(opened);
}
