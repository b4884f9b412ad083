/**
 * The one error table (src/session/errors.ts): every session error code has a class and an HTTP
 * status, and every set the other layers act on (what stops a workflow run, what an activity
 * retries, what a client reports, what a listing skips, the gateway's status) is the table's.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { describe, expect, it } from 'vitest';
import { toTemporalFailure } from '../../src/activities/failures.js';
import { ERROR_STATUS } from '../../src/gateway/errors.js';
import {
  CALLER_VISIBLE_CODES,
  FATAL_CODES,
  RETRYABLE_CODES,
  SESSION_ERRORS,
  SESSION_ERROR_CODES,
  SessionlogError,
  UNREADABLE_LOG_CODES,
  isSessionErrorCode,
  type SessionErrorCode,
} from '../../src/session/index.js';

const sorted = (codes: Iterable<string>) => [...codes].sort();

describe('the session error table', () => {
  it('gives every code a class and an HTTP status that agrees with the class', () => {
    expect(SESSION_ERROR_CODES.length).toBeGreaterThanOrEqual(29);
    for (const code of SESSION_ERROR_CODES) {
      const { class: kind, status } = SESSION_ERRORS[code];
      expect(['refusal', 'fatal', 'retryable', 'internal'], code).toContain(kind);
      if (kind === 'refusal') expect(status, code).toBeGreaterThanOrEqual(400);
      if (kind === 'refusal') expect(status, code).toBeLessThan(500);
      if (kind === 'internal') expect(status, code).toBeGreaterThanOrEqual(500);
      if (kind === 'fatal' || kind === 'retryable') expect(status, code).toBeGreaterThanOrEqual(409);
    }
  });

  it('stops a workflow run on exactly the codes that mean another writer or a log this run cannot write', () => {
    expect(sorted(FATAL_CODES)).toEqual(
      sorted(['LOG_BEHIND', 'LOG_AHEAD', 'CORRUPT_LOG', 'UNSUPPORTED_FORMAT', 'OP_CONFLICT', 'SESSION_ERASED']),
    );
  });

  it('retries an unavailable store and a step attempt that another attempt of the same step wrote before', () => {
    expect(sorted(RETRYABLE_CODES)).toEqual(['SEQ_CONFLICT', 'UNAVAILABLE']);
  });

  it('skips in listings exactly the sessions whose log is gone or unreadable', () => {
    expect(sorted(UNREADABLE_LOG_CODES)).toEqual(
      sorted(['CORRUPT_LOG', 'UNSUPPORTED_FORMAT', 'SESSION_NOT_FOUND', 'SESSION_ERASED']),
    );
  });

  it('derives every set from the table and nothing else', () => {
    for (const code of SESSION_ERROR_CODES) {
      const spec: { class: string; unreadableLog?: true } = SESSION_ERRORS[code];
      expect(FATAL_CODES.has(code), code).toBe(spec.class === 'fatal');
      expect(RETRYABLE_CODES.has(code), code).toBe(spec.class === 'retryable');
      expect(CALLER_VISIBLE_CODES.has(code), code).toBe(spec.class !== 'internal');
      expect(UNREADABLE_LOG_CODES.has(code), code).toBe(spec.unreadableLog === true);
    }
    for (const set of [FATAL_CODES, RETRYABLE_CODES, CALLER_VISIBLE_CODES, UNREADABLE_LOG_CODES])
      for (const code of set) expect(isSessionErrorCode(code), code).toBe(true);
    expect(isSessionErrorCode('NOT_CONFIGURED')).toBe(false);
    expect(isSessionErrorCode('toString')).toBe(false);
  });

  it('tells a client every refusal the workflow answers an update with, as a SessionlogError', () => {
    // The codes the workflow's validators and handlers refuse with (src/workflows), and a stopped run's reasons.
    const workflowRefusals: SessionErrorCode[] = [
      'INVALID_MESSAGE',
      'EMPTY_MESSAGE',
      'MESSAGE_TOO_LARGE',
      'INVALID_ARGUMENT',
      'SESSION_CLOSED',
      'UNKNOWN_CALL',
      'ALREADY_ANSWERED',
      'UNAVAILABLE',
      ...FATAL_CODES,
    ];
    for (const code of workflowRefusals) expect(CALLER_VISIBLE_CODES.has(code), code).toBe(true);
    for (const code of ['INVALID_EVENT', 'SURFACE_VIOLATION', 'NON_JSON_VALUE', 'STORE_CLOSED'] as const)
      expect(CALLER_VISIBLE_CODES.has(code), code).toBe(false);
  });

  it('answers each session error over HTTP with the status of its row', () => {
    for (const code of SESSION_ERROR_CODES) expect(ERROR_STATUS[code], code).toBe(SESSION_ERRORS[code].status);
    expect(ERROR_STATUS.SESSION_NOT_FOUND).toBe(404);
    expect(ERROR_STATUS.SESSION_ERASED).toBe(410);
    expect(ERROR_STATUS.MESSAGE_TOO_LARGE).toBe(422);
    expect(ERROR_STATUS.UNAVAILABLE).toBe(503);
    expect(ERROR_STATUS.INVALID_JSON).toBe(400);
  });

  it('fails an activity as non-retryable for every code but a retryable one (the model and compaction steps rely on it for INVALID_ARGUMENT and the fatal codes)', () => {
    for (const code of SESSION_ERROR_CODES) {
      const failure = toTemporalFailure(new SessionlogError(code, `refused: ${code}`));
      expect(failure, code).toBeInstanceOf(ApplicationFailure);
      expect((failure as ApplicationFailure).type, code).toBe(code);
      expect((failure as ApplicationFailure).nonRetryable, code).toBe(!RETRYABLE_CODES.has(code));
    }
    for (const code of ['INVALID_ARGUMENT' as const, ...FATAL_CODES])
      expect((toTemporalFailure(new SessionlogError(code, 'x')) as ApplicationFailure).nonRetryable, code).toBe(true);
    for (const code of ['UNAVAILABLE', 'SEQ_CONFLICT'] as const)
      expect((toTemporalFailure(new SessionlogError(code, 'x')) as ApplicationFailure).nonRetryable, code).toBe(false);
  });
});
