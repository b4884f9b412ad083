/**
 * The process fault policy (src/cli/fault-policy.ts) in a real gateway process: a fault inside a
 * request's async context closes that request's connection and the process serves on; a fault
 * outside any request exits with status 70 for the supervisor to restart the process; a fault
 * once the process is stopping is logged and the stopping goes on.
 */
import { describe, expect, it } from 'vitest';
import { runTsScript } from '../support/child-process.js';

type Seen = {
  timer: string;
  rejection: string;
  after: string;
  logged: Array<{ level: string; reqId?: string; url?: string; message: string }>;
  counted: string[];
};

describe('the process fault policy', () => {
  it('keeps serving after faults local to a request and exits 70 after a fault outside any', async () => {
    const result = await runTsScript('test/support/fault-policy-child.ts', []);
    const lines = result.stdout.trim().split('\n');
    expect(lines.length, result.stderr).toBe(2);
    const seen = JSON.parse(lines[0]!) as Seen;
    // Each faulty request lost its connection; the next request was served by the same process.
    expect(seen.timer).toMatch(/^failed/);
    expect(seen.rejection).toMatch(/^failed/);
    expect(seen.after).toBe('status 200');
    expect(seen.logged.map((entry) => entry.url)).toEqual(['/fault/timer', '/fault/rejection']);
    expect(seen.logged.every((entry) => typeof entry.reqId === 'string' && entry.reqId.startsWith('req-'))).toBe(true);
    expect(seen.counted).toEqual(['exception:request', 'rejection:request']);
    const fatal = JSON.parse(lines[1]!) as { level: string; message: string; fault: string };
    expect(fatal).toMatchObject({ level: 'fatal', fault: 'exception' });
    expect(result.code).toBe(70);
  });

  it('logs a fault while the process stops and lets it finish stopping', async () => {
    const result = await runTsScript('test/support/fault-policy-stopping-child.ts', []);
    expect(result.code, result.stderr).toBe(0);
    const seen = JSON.parse(result.stdout.trim()) as { logged: string[]; counted: string[] };
    expect(seen.counted.sort()).toEqual(['exception:stopping', 'rejection:stopping']);
    expect(seen.logged.sort()).toEqual([
      'exception: a fault while the process stops; it goes on stopping',
      'rejection: a fault while the process stops; it goes on stopping',
    ]);
  });
});
