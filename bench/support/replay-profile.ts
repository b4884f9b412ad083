/**
 * Replays one recorded session history (test/fixtures/histories) N times through one replay
 * worker and prints the time per replay: what a worker does with a cache-evicted session's first
 * task, without the server. Run it under `node --cpu-prof` to see where that time goes
 * (bench/support/profile-top.ts summarizes the profile):
 *
 *   node --cpu-prof --cpu-prof-dir=DIR --import tsx bench/support/replay-profile.ts \
 *     [sealed-tools-and-close.history.pb] [100]
 */
import { readFileSync } from 'node:fs';
import proto from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { SESSION_FAILURE_CONVERTER_PATH, SessionPayloadCodec } from '../../src/client/session-codec.js';
import type { SessionKey, SessionKeyStore } from '../../src/persistence/index.js';
import { workflowBundle } from '../../src/worker.js';
import { installQuietRuntime } from '../../test/support/stack.js';

const DIR = new URL('../../test/fixtures/histories/', import.meta.url).pathname;
const file = process.argv[2] ?? 'sealed-tools-and-close.history.pb';
const replays = Number(process.argv[3] ?? 100);

// The keys the recorded sessions' payloads are sealed with (test/support/record-histories.ts).
const recorded = JSON.parse(readFileSync(`${DIR}keys.json`, 'utf8')) as Record<string, { id: string; key: string }>;
function keyOf(sessionId: string): SessionKey | undefined {
  const key = recorded[sessionId];
  return key && { id: key.id, key: Buffer.from(key.key, 'base64') };
}
const keys: SessionKeyStore = {
  find: (sessionId) => Promise.resolve(keyOf(sessionId)),
  obtain: (sessionId) => Promise.resolve(keyOf(sessionId)!),
};

installQuietRuntime();
const history = proto.temporal.api.history.v1.History.decode(readFileSync(`${DIR}${file}`));
const bundle = await workflowBundle();
const histories = function* () {
  for (let i = 0; i < replays; i++) yield { workflowId: `replay-${i}`, history };
};
const start = performance.now();
let done = 0;
for await (const result of Worker.runReplayHistories(
  {
    workflowBundle: bundle,
    dataConverter: {
      payloadCodecs: [new SessionPayloadCodec(keys)],
      failureConverterPath: SESSION_FAILURE_CONVERTER_PATH,
    },
  },
  histories(),
)) {
  if (result.error) throw result.error;
  done += 1;
}
console.log(
  `${file}: ${history.events?.length ?? 0} events, ${done} replays, ${((performance.now() - start) / done).toFixed(1)} ms each`,
);
