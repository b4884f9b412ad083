/**
 * The fenced log writer (DESIGN §1.4–1.5, §4.1): how a workflow run appends to its session.
 *
 * - The head check: the log must hold at least what the workflow has seen (`knownHead`), and
 *   everything after it must have been written by this run. A shorter log was restored from an
 *   older copy (LOG_BEHIND); a foreign tail means another writer (LOG_AHEAD). Either stops the
 *   session rather than fork or renumber it. One shorter log is not a restore: a JSONL log whose
 *   final batch reads as torn though the workflow saw it written. A batch acknowledged to the
 *   workflow was committed, so that is damage (DESIGN §4.1, issue 52): CORRUPT_LOG naming its
 *   first bad seq, and nothing is cut. Only a batch no one was acknowledged is a torn write.
 * - The run fence: once a newer run has logged `session/run`, an older run writes nothing.
 * - The writer fence: a writer appends only right after what it last saw (the head at opening,
 *   then the end of its own last batch). The store's validated copy is shared and brought up to
 *   date by any read, so a stale attempt (its worker paused past its heartbeat while another
 *   attempt carried on) must not take its head from there: it gets SEQ_CONFLICT instead, which
 *   the activity retries (the retry opens afresh). A run whose session a newer run owns gets
 *   LOG_AHEAD, which stops that run.
 * - Exactly once: a batch is appended under its op key; a key already stored returns the
 *   stored events (the store refuses a key reused for a different batch with OP_CONFLICT).
 *
 * It works on the store's one validated copy of the session, so nothing is validated twice.
 */
import { assertTornTailUnacknowledged } from '../persistence/scanner.js';
import type { SessionStore } from '../persistence/store.js';
import { SessionlogError, type NewEvent, type SessionView, type StoredEvent } from '../session/index.js';

export class LogWriter {
  /** The seq this writer's next batch must start at: never taken from the shared copy after opening. */
  private next: number;

  private constructor(
    private readonly store: SessionStore,
    private current: SessionView,
    readonly runId: string,
    /** Where this operation's own writes may start: a replayed op is searched from here. */
    readonly fromSeq: number,
  ) {
    this.next = current.nextSeq;
  }

  /**
   * Opens the session for run `runId`, checking the log against the head the workflow knows.
   * Throws LOG_BEHIND or LOG_AHEAD (never retried: the session must be resumed from its log).
   */
  static async open(store: SessionStore, sessionId: string, runId: string, knownHead: number): Promise<LogWriter> {
    const session = await store.session(sessionId);
    if (session.nextSeq < knownHead) await refuseAcknowledgedTornTail(store, sessionId, knownHead);
    assertHead(session, runId, knownHead);
    return new LogWriter(store, session, runId, knownHead);
  }

  /** Opens the session without a head check (a run taking over reads whatever the log holds). */
  static async takeOver(store: SessionStore, sessionId: string, runId: string): Promise<LogWriter> {
    const session = await store.session(sessionId);
    return new LogWriter(store, session, runId, session.nextSeq);
  }

  /** The session as validated by the store, at the head after this writer's last append. */
  get session(): SessionView {
    return this.current;
  }

  /** The events of batch `op` if it is already logged (this run's writes since `fromSeq`). */
  logged(op: string): StoredEvent[] {
    return this.session.eventsOfOp(op, this.fromSeq);
  }

  /** Logs this run's `session/run` marker: the one append that ignores the previous owner. */
  async claim(marker: NewEvent<'session/run'>, op: string): Promise<void> {
    await this.write([marker], op);
  }

  /**
   * Appends `events` as one batch under `op`, once: a batch already stored under `op` is
   * returned as stored. `delivered`: inbox keys of the entries the batch logs, removed with it.
   * LOG_AHEAD when another run owns the session now.
   */
  async append(events: readonly NewEvent[], op: string, delivered?: readonly string[]): Promise<StoredEvent[]> {
    const owner = this.session.owningRun;
    if (owner !== undefined && owner !== this.runId) {
      throw new SessionlogError(
        'LOG_AHEAD',
        `session ${this.session.id} is now owned by run ${owner}; run ${this.runId} may not append to it`,
      );
    }
    return this.write(events, op, delivered);
  }

  private async write(events: readonly NewEvent[], op: string, delivered?: readonly string[]): Promise<StoredEvent[]> {
    const result = await this.store.append(this.current.id, events, {
      expectedSeq: this.next,
      op,
      ...(delivered && delivered.length > 0 ? { delivered } : {}),
    });
    if (!result.replayed) this.next = result.lastSeq + 1;
    this.current = await this.store.session(this.current.id);
    const stored: StoredEvent[] = [];
    for (let seq = result.firstSeq; seq <= result.lastSeq; seq++) {
      const event = this.current.storedAt(seq);
      if (event) stored.push(event);
    }
    return stored;
  }
}

/** CORRUPT_LOG when the log reads as shorter than `knownHead` because a batch this run saw reads as torn. */
async function refuseAcknowledgedTornTail(store: SessionStore, sessionId: string, knownHead: number): Promise<void> {
  const { problem } = await store.scan(sessionId);
  if (problem?.torn) assertTornTailUnacknowledged(`session ${sessionId}`, sessionId, problem, knownHead);
}

function assertHead(session: SessionView, runId: string, knownHead: number): void {
  if (session.nextSeq < knownHead) {
    throw new SessionlogError(
      'LOG_BEHIND',
      `session ${session.id}: the log ends at seq ${session.nextSeq - 1} but this workflow run has already seen seq ${knownHead - 1}; the store was restored from an older copy or lost writes. Nothing more is appended; run \`sessionlog sessions resume ${session.id}\` to continue from what the log holds`,
    );
  }
  for (let seq = knownHead; seq < session.nextSeq; seq++) {
    const op = session.storedAt(seq)?.op ?? '';
    if (!op.startsWith(`${runId}/`)) {
      throw new SessionlogError(
        'LOG_AHEAD',
        `session ${session.id}: event ${seq} (op ${op || 'none'}) was not written by run ${runId}, so another writer is active; nothing more is appended by this run. Stop the other writer, then run \`sessionlog sessions resume ${session.id}\``,
      );
    }
  }
}
