/**
 * Issue 52 through the real processes: a JSONL session written by a `sessionlog worker` process
 * and `sessionlog send`, whose final `turn/end` line is damaged in place while no worker runs (its
 * first byte changed; the line still complete and ending in its newline). The batch was
 * acknowledged, so it is damage, never a torn write: `sessions export` and `sessions verify` exit
 * non-zero naming its seq, the next message is refused with CORRUPT_LOG, and the batch's three
 * intact records (`assistant/chunk`, `assistant/message`, `step/end`) stay on disk with the file
 * byte for byte as it was.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startCli, type CliProcess } from '../support/cli-process.js';
import { StoreStack } from '../support/store-stack.js';
import { tempDir } from '../support/store-fixtures.js';

const { dir, cleanup } = tempDir('sessionlog-ack-cli-');
const root = join(dir, 'root');
/** Not started: it runs `sessionlog` commands as child processes against its store and task queue. */
const commands = new StoreStack(`jsonl:${root}`);
const id = `ack-${Date.now()}`;
const logPath = join(root, id, 'session.jsonl');
let worker: CliProcess | undefined;

async function startWorker(): Promise<CliProcess> {
  const started = startCli('worker', dir, {
    SESSIONLOG_STORE: commands.url,
    SESSIONLOG_TASK_QUEUE: commands.taskQueue,
  });
  await started.waitFor(/(worker on )/);
  return started;
}

beforeAll(async () => {
  worker = await startWorker();
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  cleanup();
}, 60_000);

type Line = { seq: number; type: string; op: string };

it('a finished JSONL session whose acknowledged final turn/end is damaged in place: export and verify exit non-zero naming its seq, the next message is refused, and the batch stays on disk', async () => {
  for (const text of ['first question', 'second question']) {
    const sent = await commands.cli(['send', id, text]);
    expect(sent.code, sent.stderr).toBe(0);
  }
  // Damaged while no worker runs, so no process holds a copy of the log it read before.
  expect(await worker!.stop()).toBe(0);
  worker = undefined;
  const bytes = readFileSync(logPath);
  const lastLineStart = bytes.lastIndexOf(10, bytes.length - 2) + 1;
  const lines = bytes
    .toString('utf8')
    .trimEnd()
    .split('\n')
    .slice(1)
    .map((line) => JSON.parse(line) as Line);
  const last = lines.at(-1)!;
  expect(last.type).toBe('turn/end');
  const finalBatch = lines.filter((line) => line.op === last.op);
  expect(finalBatch.slice(-4).map((line) => line.type)).toEqual([
    'assistant/chunk',
    'assistant/message',
    'step/end',
    'turn/end',
  ]);
  const damaged = Buffer.from(bytes);
  damaged[lastLineStart] = 'X'.charCodeAt(0);
  writeFileSync(logPath, damaged);
  const namesTheSeq = (text: string): void => {
    expect(text).toMatch(/CORRUPT_LOG/);
    expect(text).toContain(id);
    expect(text).toMatch(new RegExp(`seq ${last.seq}\\b`));
  };

  const exported = await commands.cli(['sessions', 'export', id]);
  expect(exported.code, 'sessions export refuses the damaged log').not.toBe(0);
  expect(exported.stdout, 'sessions export prints nothing of a refused log').toBe('');
  namesTheSeq(exported.stderr);

  const verified = await commands.cli(['--json', 'sessions', 'verify', id]);
  expect(verified.code, verified.stderr).toBe(1);
  expect(JSON.parse(verified.stdout)).toMatchObject({
    ok: false,
    violations: expect.arrayContaining([expect.objectContaining({ seq: last.seq, rule: 'stored-record' })]),
  });

  worker = await startWorker();
  const next = await commands.cli(['send', id, 'third', 'question']);
  expect(next.code, 'the next message is refused').not.toBe(0);
  namesTheSeq(next.stderr);

  expect(readFileSync(logPath).equals(damaged), 'the log is byte for byte as it was damaged').toBe(true);
  const kept = damaged
    .toString('utf8', 0, lastLineStart)
    .trimEnd()
    .split('\n')
    .slice(-3)
    .map((line) => (JSON.parse(line) as Line).type);
  expect(kept).toEqual(['assistant/chunk', 'assistant/message', 'step/end']);
}, 240_000);
