/**
 * Which Temporal failures mean "this run is gone" to an erase and to the checks after it. The
 * server reports a run it deleted as NOT_FOUND, and one it is deleting (record still there,
 * history removed) as INVALID_ARGUMENT "Requested workflow history not found, may have passed
 * retention period." (seen by the fleet test reading a history right after an erase). Any other
 * INVALID_ARGUMENT is a real error and must not pass as gone.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { isGoneFromTemporal } from '../../src/client/erase.js';

/** gRPC status codes used here. */
const status = { INVALID_ARGUMENT: 3, NOT_FOUND: 5, PERMISSION_DENIED: 7, UNAVAILABLE: 14 } as const;

/** A failed call as @grpc/grpc-js rejects it (callErrorFromStatus): an Error with code and details. */
function grpcError(code: number, details: string): Error {
  return Object.assign(new Error(`${code}: ${details}`), { code, details });
}

describe('isGoneFromTemporal', () => {
  it('counts a deleted run (NOT_FOUND, or the client’s WorkflowNotFoundError) as gone', () => {
    expect(isGoneFromTemporal(grpcError(status.NOT_FOUND, 'workflow execution not found'))).toBe(true);
    expect(isGoneFromTemporal(new WorkflowNotFoundError('not found', 'wf', 'run'))).toBe(true);
  });

  it('counts a run whose history the server already removed (INVALID_ARGUMENT, history not found) as gone', () => {
    const deleting = grpcError(
      status.INVALID_ARGUMENT,
      'Requested workflow history not found, may have passed retention period.',
    );
    expect(isGoneFromTemporal(deleting)).toBe(true);
  });

  it('keeps every other failure an error', () => {
    expect(isGoneFromTemporal(grpcError(status.INVALID_ARGUMENT, 'Namespace is not set on request.'))).toBe(false);
    expect(isGoneFromTemporal(grpcError(status.UNAVAILABLE, 'history not found'))).toBe(false);
    expect(isGoneFromTemporal(grpcError(status.PERMISSION_DENIED, 'Request unauthorized.'))).toBe(false);
    expect(isGoneFromTemporal(new Error('history not found'))).toBe(false);
    expect(isGoneFromTemporal(undefined)).toBe(false);
    expect(isGoneFromTemporal('5')).toBe(false);
  });
});
