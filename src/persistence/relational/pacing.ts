/** The relational backends' provider pacing buckets (the `pacing` table). */
import { pacingStore, parsePaceState } from '../pacing.js';
import { step, type RelationalDriver, type Use } from './driver.js';
import type { PacingStore } from '../store.js';

/** Provider pacing buckets in the `pacing` table: a bucket's read-modify-write in one write transaction. */
export function relationalPacing(use: Use, driver: RelationalDriver): PacingStore {
  return pacingStore((key, change) =>
    use(() =>
      driver.run('write', function* (tx) {
        const stored = yield* step(tx.lockPaceRow(key));
        const previous = stored === undefined ? undefined : parsePaceState(stored, `pacing of ${driver.location}`);
        const next = change(previous);
        if (next === undefined) return previous;
        yield* step(tx.putPaceRow(key, JSON.stringify(next), Date.now()));
        return next;
      }),
    ),
  );
}
