/**
 * The calling session's own log as its tools see it (`search_history`, `read_history`): bound
 * to the session id the engine runs the call for, so no tool can reach another session.
 */
import type { SessionStore } from '../persistence/store.js';
import type { SessionView } from '../session/index.js';
import type { HistoryHit, SessionHistory } from '../tools/registry.js';

/** The turn `seq` belongs to: the last turn started at or before it (0 before the first). */
function turnOf(session: SessionView, seq: number): number {
  let turn = 0;
  for (const record of session.turns.turns.values()) {
    if (record.startSeq > seq) break;
    turn = record.turn;
  }
  return turn;
}

export function historyOf(store: SessionStore, sessionId: string): SessionHistory {
  return {
    async search(query, limit) {
      const hits = await store.search(sessionId, query, { limit });
      const session = await store.session(sessionId);
      const surface = new Set(session.surfaceNodes);
      return hits.map((hit): HistoryHit => {
        const event = session.storedAt(hit.seq);
        return {
          seq: hit.seq,
          turn: turnOf(session, hit.seq),
          type: event?.type ?? 'unknown',
          snippet: hit.snippet,
          shadowed: event?.surfaceOp !== undefined && !surface.has(hit.seq),
        };
      });
    },
    read: (fromSeq, toSeq) => store.readFrom(sessionId, fromSeq, toSeq - fromSeq + 1),
    nextSeq: () => store.nextSeq(sessionId),
  };
}
