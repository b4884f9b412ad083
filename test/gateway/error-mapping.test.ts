import { describe, expect, it } from 'vitest';
import { toErrorResponse } from '../../src/gateway/errors.js';
import { SessionlogError } from '../../src/session/errors.js';

describe('5xx answers never carry where the data lives', () => {
  const where = 'session s-1 in postgres://app@db.internal:5432/sessions?schema=prod';

  it('a refused log keeps its session and seq and says what to do, without the store location', () => {
    const error = new SessionlogError(
      'CORRUPT_LOG',
      `${where}: the stored log is damaged at seq 13: seq is 14, expected 13 (gap or duplicate). Nothing was changed`,
    );
    const response = toErrorResponse(error);
    expect(response.status).toBe(500);
    expect(response.body.error.code).toBe('CORRUPT_LOG');
    expect(response.body.error.message).toContain('session s-1');
    expect(response.body.error.message).toContain('at seq 13');
    expect(response.body.error.message).toContain('sessionlog sessions salvage s-1 --into NEW_ID');
    expect(response.body.error.message).not.toMatch(/postgres:|db\.internal|schema=/);
  });

  it('a newer format says to upgrade, a damaged header names no seq, both without the location', () => {
    const newer = toErrorResponse(
      new SessionlogError(
        'UNSUPPORTED_FORMAT',
        `session s-2 in /srv/data/s-2/session.jsonl: JSONL format 9 was written by a newer version`,
      ),
    );
    expect(newer.body.error.message).toMatch(/^session s-2: .*upgrade/);
    expect(newer.body.error.message).not.toContain('/srv/data');
    const header = toErrorResponse(
      new SessionlogError(
        'CORRUPT_LOG',
        `session s-3 in sqlite:/srv/x.db: the stored header (the record before the events) is damaged: not JSON`,
      ),
    );
    expect(header.body.error.message).not.toContain('/srv/x.db');
    expect(header.body.error.message).not.toMatch(/at seq/);
  });

  it('any other server fault is generic', () => {
    const response = toErrorResponse(new Error('ENOENT /srv/secret/path'));
    expect(response.status).toBe(500);
    expect(response.body.error.message).not.toContain('/srv/secret');
  });

  it("a body the client stopped sending (Node's `aborted`, statusCode 400) is the client's 400, not a fault to log", () => {
    const aborted = Object.assign(new Error('aborted'), { code: 'ECONNRESET', statusCode: 400 });
    const response = toErrorResponse(aborted);
    expect(response.status).toBe(400);
    expect(response.logDetail).toBe(false);
    // A 5xx statusCode on an unknown error stays a generic, logged 500.
    const fault = toErrorResponse(Object.assign(new Error('boom'), { statusCode: 503 }));
    expect([fault.status, fault.logDetail]).toEqual([500, true]);
  });
});
