/**
 * Older SQLite schema layouts, for upgrade tests that write a file with the current build and
 * then turn parts of it back into what an older build wrote.
 */
import type Database from 'better-sqlite3';

/**
 * Rewrites the events of a current (version 11) file into the layout of versions 1 to 9: a
 * `WITHOUT ROWID` events table keyed `(session_key, seq)` and the batches in their own table with
 * an index on `last_seq`, every row and batch kept; the `media` table of version 11 is dropped.
 * The caller sets `user_version`.
 */
export function eventsToVersion9(db: Database.Database): void {
  mediaToVersion10(db);
  db.exec(`
ALTER TABLE events RENAME TO events_v10;
CREATE TABLE events (
  session_key INTEGER NOT NULL REFERENCES sessions(key),
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  time INTEGER NOT NULL,
  data TEXT NOT NULL,
  surface_op TEXT,
  source_event_seqs TEXT,
  ignorable INTEGER,
  PRIMARY KEY (session_key, seq)
) STRICT, WITHOUT ROWID;
CREATE TABLE batches (
  session_key INTEGER NOT NULL REFERENCES sessions(key),
  op TEXT NOT NULL,
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  PRIMARY KEY (session_key, op)
) STRICT, WITHOUT ROWID;
CREATE INDEX batches_by_last_seq ON batches (session_key, last_seq);
INSERT INTO events SELECT session_key, seq, type, time, data, surface_op, source_event_seqs, ignorable FROM events_v10;
INSERT INTO batches SELECT session_key, batch_op, seq, batch_last_seq FROM events_v10 WHERE batch_op IS NOT NULL;
DROP TABLE events_v10;
`);
}

/** Takes a current file back to version 10: without the `media` table of version 11. The caller sets `user_version`. */
export function mediaToVersion10(db: Database.Database): void {
  db.exec(`DROP TABLE media;`);
}
