/**
 * Search on a 100,000-event session (issue 13), on every backend: the index answers from a log
 * that size with the right ranking and within its bounds. Three needles hide among ~16,700
 * turns of seeded filler text; a word common to every user message tests the limit. Timings are
 * in bench/search.ts, not here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, SEARCH_MAX_LIMIT, SNIPPET_MAX_CHARS, type SessionStore } from '../../src/persistence/index.js';
import type { NewEvent } from '../../src/session/index.js';
import { assistantMessage, testHeader, userMessage } from '../support/persistence-events.js';
import { postgresTestSchema, postgresUrlWithSchema, probePostgres, tempDir } from '../support/store-fixtures.js';

const postgres = await probePostgres();
if (!postgres.available) console.warn(`large search tests: PostgreSQL skipped: ${postgres.reason}`);

const EVENTS_PER_TURN = 6;
const TURNS = Math.ceil(100_000 / EVENTS_PER_TURN);
/** Words in each user message (the needles' messages too, so text length does not decide their order). */
const WORDS_PER_MESSAGE = 24;
const NEEDLE = 'zyzzogeton';
/** Turn → occurrences of the needle in its user message: the expected order is 120, 16_500, 8_000. */
const NEEDLES = new Map([
  [8_000, 1],
  [120, 3],
  [16_500, 2],
]);

/** A small seeded generator (mulberry32), so the filler is the same on every run. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const next = random(42);
const VOCABULARY = Array.from({ length: 3000 }, (_, i) => `w${i.toString(36)}${'aeiou'[i % 5]}`);
const filler = (n: number) =>
  Array.from({ length: n }, () => VOCABULARY[Math.floor(next() * VOCABULARY.length)]!).join(' ');

/** The user message of `turn`: the common word, the needle as often as planted, filler to a fixed length. */
function userText(turn: number): string {
  const needles = NEEDLES.get(turn) ?? 0;
  return ['common', ...Array<string>(needles).fill(NEEDLE), filler(WORDS_PER_MESSAGE - 1 - needles)].join(' ');
}

function turnEvents(turn: number): NewEvent[] {
  return [
    { type: 'turn/start', time: turn, data: { turn } },
    userMessage(`u${turn}`, userText(turn), turn),
    { type: 'step/start', time: turn, data: { turn, step: 1 } },
    assistantMessage(`a${turn}`, filler(40), turn, turn),
    { type: 'step/end', time: turn, data: { turn, step: 1 } },
    { type: 'turn/end', time: turn, data: { turn, reason: { kind: 'completed' } } },
  ];
}

/** The seq of turn `turn`'s user message. */
const userSeq = (turn: number) => (turn - 1) * EVENTS_PER_TURN + 1;

const BACKENDS: Array<{ name: string; url: (dir: string) => string; skip?: boolean }> = [
  { name: 'SQLite', url: (dir) => `sqlite:${dir}/sessions.db` },
  { name: 'JSONL', url: (dir) => `jsonl:${dir}/jsonl` },
  { name: 'PostgreSQL', url: () => postgresUrlWithSchema(postgresTestSchema()), skip: !postgres.available },
];

describe.each(BACKENDS)('search on a 100,000-event session: $name', ({ url, skip }) => {
  let store: SessionStore;
  let cleanup: () => void;

  beforeAll(async () => {
    if (skip) return;
    const temp = tempDir('sessionlog-search-large-');
    cleanup = temp.cleanup;
    store = await openStore(url(temp.dir));
    await store.create(testHeader('big'));
    for (let first = 1; first <= TURNS; first += 200) {
      const events: NewEvent[] = [];
      for (let turn = first; turn < first + 200 && turn <= TURNS; turn++) events.push(...turnEvents(turn));
      await store.append('big', events, { expectedSeq: (first - 1) * EVENTS_PER_TURN, op: `load-${first}` });
    }
    // A second session with the needle: never in this session's hits.
    await store.create(testHeader('other'));
    await store.append(
      'other',
      [
        { type: 'turn/start', time: 1, data: { turn: 1 } },
        userMessage('o1', `${NEEDLE} ${NEEDLE} ${NEEDLE} ${NEEDLE}`),
      ],
      { expectedSeq: 0, op: 'other' },
    );
  }, 600_000);
  afterAll(async () => {
    await store?.close();
    cleanup?.();
  });

  it.skipIf(skip)(
    'holds over 100,000 events and ranks the three needles by their occurrences',
    async () => {
      expect((await store.session('big')).nextSeq).toBeGreaterThanOrEqual(100_000);
      const hits = await store.search('big', NEEDLE);
      expect(hits.map((h) => h.seq)).toEqual([userSeq(120), userSeq(16_500), userSeq(8_000)]);
      expect(hits[0]!.score).toBeGreaterThan(hits[1]!.score);
      expect(hits[1]!.score).toBeGreaterThan(hits[2]!.score);
      for (const hit of hits) {
        expect(hit.snippet.length).toBeLessThanOrEqual(SNIPPET_MAX_CHARS);
        expect(hit.snippet).toContain(NEEDLE);
      }
      // Every word must match: the needle with the common word finds the same three, with an absent word none.
      expect((await store.search('big', `common ${NEEDLE}`)).map((h) => h.seq).sort((a, b) => a - b)).toEqual([
        userSeq(120),
        userSeq(8_000),
        userSeq(16_500),
      ]);
      expect(await store.search('big', `${NEEDLE} nowhereword`)).toEqual([]);
    },
    120_000,
  );

  it.skipIf(skip)(
    'bounds a word that every turn holds: default 20, at most 100, best first, only user messages of this session',
    async () => {
      const byDefault = await store.search('big', 'common');
      expect(byDefault).toHaveLength(20);
      const most = await store.search('big', 'common', { limit: SEARCH_MAX_LIMIT });
      expect(most).toHaveLength(SEARCH_MAX_LIMIT);
      for (let i = 1; i < most.length; i++) expect(most[i]!.score).toBeLessThanOrEqual(most[i - 1]!.score);
      expect(new Set(most.map((h) => h.seq)).size).toBe(most.length);
      for (const hit of most) {
        expect((hit.seq - 1) % EVENTS_PER_TURN, `seq ${hit.seq} is a user message`).toBe(0);
        expect(hit.seq).toBeLessThan(TURNS * EVENTS_PER_TURN);
      }
      await expect(store.search('big', 'common', { limit: SEARCH_MAX_LIMIT + 1 })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
      await expect(
        store.search('big', Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ')),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    },
    120_000,
  );
});
