/** The relational backends' transcript index (the `transcripts` table). */
import { notFound } from '../errors.js';
import { type TranscriptEntry, type TranscriptIndex } from '../store.js';
import { assertTranscriptKey, storedTranscriptEntry, transcriptPutEntry } from '../transcripts.js';
import { step, type RelationalDriver, type RelationalTx, type Steps, refuseTombstoned, type Use } from './driver.js';

/**
 * The transcript index in the `transcripts` table: (scope, digest) names a session's row key, so
 * an entry cannot outlive its session (the key is a foreign key, and erasure deletes the rows),
 * and a read joins the session for its id. A put is one upsert statement on its own.
 */
export class RelationalTranscripts implements TranscriptIndex {
  constructor(
    private readonly use: Use,
    private readonly driver: RelationalDriver,
  ) {}

  put(scope: string, digest: string, entry: TranscriptEntry): Promise<void> {
    return this.use(() => {
      const checked = transcriptPutEntry(scope, digest, entry);
      return this.driver.run('single', (tx) => putTranscriptEntry(tx, scope, digest, checked));
    });
  }

  get(scope: string, digest: string): Promise<TranscriptEntry | undefined> {
    return this.use(async () => {
      assertTranscriptKey(scope, digest);
      const row = await this.driver.run('single', (tx) => step(tx.transcriptEntry(scope, digest)));
      return row && storedTranscriptEntry(row.sessionId, row.seq, `the transcript index of ${this.driver.location}`);
    });
  }
}

/** The upsert; when it found no session, SESSION_ERASED while the id's tombstone lasts, else SESSION_NOT_FOUND. */
function* putTranscriptEntry(tx: RelationalTx, scope: string, digest: string, entry: TranscriptEntry): Steps<void> {
  if (yield* step(tx.upsertTranscriptEntry(scope, digest, entry))) return;
  yield* refuseTombstoned(tx, entry.sessionId);
  throw notFound(entry.sessionId);
}
