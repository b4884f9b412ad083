/**
 * Token meter benchmark (DESIGN §6). Run alone: `npx tsx bench/meter.ts`.
 *
 * 1. Accuracy: a deterministic mixed corpus of requests (English prose, code, JSON, Chinese,
 *    tool calls and tool output) is sent to the fake model server over HTTP with the real
 *    `openai` client; its `usage.prompt_tokens` (DeepSeek V3 tokenizer under the chat
 *    template) is the truth. Beside the meter: the 4-characters-per-token heuristic of
 *    dsh-spec §7.1, plain `o200k_base` (the OpenAI tokenizer and overhead on the same
 *    request), and `o200k_base` after usage calibration learned on the first requests.
 * 2. Cost: one `measure()` after appending one message to a 1,000-message session, against a
 *    full recount (a fresh meter), medians over repetitions.
 * 3. Counting speed: a reply's text (1,600 characters of prose, of code, of Chinese) counted by
 *    `encodeOrdinary` and by lenml's own ordinary pipeline (its pre-tokenizer, then its BPE) in
 *    the same process, alternately, each text new to both (a number appended); the ids compared.
 */
import OpenAI from 'openai';
import { heuristicPricer } from './support/heuristic.js';
import { createTokenMeter, UsageCalibration } from '../src/context/token-meter.js';
import { disposeTokenizers } from '../src/context/tokenizers.js';
import { startFakeModelServer } from '../src/model/fake-server.js';
import { deepseekPromptTokenIds, encodeOrdinary } from '../src/model/deepseek-tokens.js';
import type { RequestHeader, Session } from '../src/session/index.js';
import {
  TEST_SYSTEM,
  TEST_TOOLS,
  TEXT_FRAGMENTS,
  appendExchange,
  meterSession,
  randomExchange,
  seededRandom,
  wireRequest,
} from '../test/context/meter-conversations.js';
import { lenmlOrdinary } from '../test/support/lenml-ordinary.js';
import { fmtMs, machineLine, mean, median, printGrid, printTable, since } from './support/report.js';

const REQUESTS = 200;
const CALIBRATION_REQUESTS = 20;
const COST_MESSAGES = 1_000;
const COST_REPS = 41;
const FULL_REPS = 9;

const PROSE = [
  'The committee reviewed the proposal in detail and asked for a clearer budget. ',
  'Despite the rain, the market was crowded with people buying fresh bread and fruit. ',
  'In short, the migration succeeded, but two services still read the old configuration. ',
  'She wrote the report over the weekend, checking every figure twice before sending it.\n',
];
const CODE = [
  'export function parse(input: string): Node[] {\n  const out: Node[] = [];\n  for (const line of input.split("\\n")) out.push(lex(line));\n  return out;\n}\n',
  'def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n',
  'if (err != nil) {\n\treturn fmt.Errorf("open %s: %w", path, err)\n}\n',
  '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }\n',
];
const JSON_TEXT = [
  JSON.stringify({
    id: 'evt_01H',
    type: 'invoice.paid',
    data: { amount: 1299, currency: 'eur', lines: [{ sku: 'A-1', qty: 2 }] },
  }),
  JSON.stringify([
    { name: 'alpha', tags: ['x', 'y'], score: 0.93 },
    { name: 'beta', tags: [], score: null },
  ]),
  JSON.stringify({ config: { retries: 3, backoff: { base: 250, max: 8000 }, hosts: ['a.example', 'b.example'] } }),
];
const CHINESE = [
  '今天我们讨论了项目的进度，大家都认为下周可以完成第一阶段的工作。',
  '请帮我把这段代码改成异步的版本，并且补充必要的错误处理。',
  '数据库迁移已经完成，但是有两个服务仍然读取旧的配置文件。',
  '这个函数的时间复杂度是多少？能否进一步优化？',
];

/** Corpus categories: each request's conversation draws its text from one pool. */
const CATEGORIES: ReadonlyArray<{ name: string; fragments: readonly string[]; toolSteps: number }> = [
  { name: 'prose', fragments: PROSE, toolSteps: 0 },
  { name: 'code', fragments: CODE, toolSteps: 1 },
  { name: 'json', fragments: JSON_TEXT, toolSteps: 1 },
  { name: 'chinese', fragments: CHINESE, toolSteps: 0 },
  { name: 'tools', fragments: [...PROSE, ...CODE, ...JSON_TEXT], toolSteps: 3 },
  { name: 'mixed', fragments: [...TEXT_FRAGMENTS, ...PROSE, ...CODE, ...JSON_TEXT, ...CHINESE], toolSteps: 2 },
];

type Sample = {
  category: string;
  exact: number;
  meter: number;
  heuristic: number;
  o200k: number;
  o200kCalibrated?: number;
};

function buildCorpus(): Array<{ category: string; session: Session; header: RequestHeader }> {
  const random = seededRandom(20_260_101);
  const corpus: Array<{ category: string; session: Session; header: RequestHeader }> = [];
  for (let i = 0; i < REQUESTS; i++) {
    const category = CATEGORIES[i % CATEGORIES.length]!;
    const session = meterSession(`bench-${i}`);
    const exchanges = 1 + Math.floor(random() * 6);
    for (let t = 1; t <= exchanges; t++)
      appendExchange(session, randomExchange(random, 8, category.fragments, category.toolSteps), t);
    const header: RequestHeader = {
      provider: 'fake',
      model: 'fake',
      system: TEST_SYSTEM,
      ...(category.toolSteps > 0 ? { tools: TEST_TOOLS } : {}),
    };
    corpus.push({ category: category.name, session, header });
  }
  return corpus;
}

function heuristicEstimate(session: Session, header: RequestHeader): number {
  const { systemTokens, toolsTokens } = heuristicPricer.header(header);
  return systemTokens + toolsTokens + session.deriveMessages().reduce((sum, m) => sum + heuristicPricer.message(m), 0);
}

const errorPct = (estimate: number, exact: number): number => (Math.abs(estimate - exact) / exact) * 100;

async function accuracy(): Promise<Sample[]> {
  const corpus = buildCorpus();
  const server = await startFakeModelServer();
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'bench', maxRetries: 0 });
  const meter = createTokenMeter();
  const calibration = new UsageCalibration();
  const calibrated = createTokenMeter({ calibration });
  const samples: Sample[] = [];
  try {
    for (const [index, { category, session, header }] of corpus.entries()) {
      const request = wireRequest(session, header);
      const response = await client.chat.completions.create({
        model: header.model,
        messages: request.messages as OpenAI.Chat.ChatCompletionMessageParam[],
        ...(request.tools ? { tools: request.tools as OpenAI.Chat.ChatCompletionTool[] } : {}),
        stream: false,
      });
      const exact = response.usage?.prompt_tokens;
      if (exact === undefined) throw new Error('the fake server reported no usage');
      const openaiHeader: RequestHeader = { ...header, provider: 'openai', model: 'gpt-4o' };
      // An OpenAI-family model the catalogue does not know, so calibration applies to it.
      const guessedHeader: RequestHeader = { ...header, provider: 'openai', model: 'gpt-next' };
      const sample: Sample = {
        category,
        exact,
        meter: meter.measure(session, header).totalTokens,
        heuristic: heuristicEstimate(session, header),
        o200k: meter.measure(session, openaiHeader).totalTokens,
      };
      const guessed = calibrated.measure(session, guessedHeader);
      if (index < CALIBRATION_REQUESTS) {
        calibration.record({
          model: 'gpt-next',
          estimatedPromptTokens: guessed.uncalibratedTokens,
          reportedPromptTokens: exact,
        });
      } else {
        sample.o200kCalibrated = guessed.totalTokens;
      }
      samples.push(sample);
    }
  } finally {
    await server.close();
  }
  return samples;
}

type Stats = { mean: number; max: number };
function stats(samples: readonly Sample[], pick: (s: Sample) => number | undefined): Stats {
  const errors = samples.flatMap((s) => {
    const v = pick(s);
    return v === undefined ? [] : [errorPct(v, s.exact)];
  });
  return { mean: mean(errors), max: Math.max(...errors) };
}
const fmtPct = (v: number): string => `${v.toFixed(2)}%`;

function costSession(): Session {
  const random = seededRandom(99);
  const session = meterSession('bench-cost');
  let turn = 0;
  while (session.surfaceNodes.length < COST_MESSAGES)
    appendExchange(session, randomExchange(random, 8, [...TEXT_FRAGMENTS, ...PROSE, ...CODE, ...CHINESE], 2), ++turn);
  return session;
}

function cost(): {
  incrementalMs: number;
  fullMs: number;
  exactCountMs: number;
  messages: number;
  promptTokens: number;
} {
  const header: RequestHeader = { provider: 'fake', model: 'fake', system: TEST_SYSTEM, tools: TEST_TOOLS };
  const session = costSession();
  const meter = createTokenMeter();
  meter.measure(session, header);
  const incremental: number[] = [];
  const full: number[] = [];
  let promptTokens = 0;
  for (let i = 0; i < COST_REPS; i++) {
    session.append({
      type: 'user/message',
      time: 1_700_000_000_000,
      data: {
        id: `late-${i}`,
        role: 'user',
        content: [{ type: 'text', text: `${PROSE[i % PROSE.length]} (${i})` }],
        source: { kind: 'user' },
      },
      surfaceOp: 'append',
    });
    const start = performance.now();
    promptTokens = meter.measure(session, header).totalTokens;
    incremental.push(since(start));
    if (i < FULL_REPS) {
      const fullStart = performance.now();
      createTokenMeter().measure(session, header);
      full.push(since(fullStart));
    }
  }
  const exact: number[] = [];
  for (let i = 0; i < 3; i++) {
    const start = performance.now();
    const request = wireRequest(session, header);
    deepseekPromptTokenIds(request.messages, request.tools);
    exact.push(since(start));
  }
  return {
    incrementalMs: median(incremental),
    fullMs: median(full),
    exactCountMs: median(exact),
    messages: session.surfaceNodes.length,
    promptTokens,
  };
}

const SPEED_CHARS = 1_600;
const SPEED_TEXTS = 200;
const SPEED_ROUNDS = 7;

/** Milliseconds per reply text for each kind of text, ours and lenml's (median of rounds). */
function countingSpeed(): Array<{ kind: string; oursMs: number; lenmlMs: number }> {
  const lenml = lenmlOrdinary();
  const kinds = [
    { kind: 'English prose', parts: PROSE },
    { kind: 'code', parts: CODE },
    {
      kind: 'Chinese',
      parts: ['模型的回复被记录在会话日志中，每条消息都从日志派生。', '上下文压力通过修剪和压缩来处理。'],
    },
  ];
  return kinds.map(({ kind, parts }) => {
    let base = '';
    for (let i = 0; base.length < SPEED_CHARS; i++) base += parts[i % parts.length];
    base = base.slice(0, SPEED_CHARS);
    let serial = 0;
    // Each text is new to both (a number appended), so neither counts a text it has seen whole.
    const texts = () => Array.from({ length: SPEED_TEXTS }, () => `${base} ${serial++}`);
    for (const text of texts().slice(0, 5)) {
      if (JSON.stringify(encodeOrdinary(text)) !== JSON.stringify(lenml(text)))
        throw new Error(`encodeOrdinary and lenml disagree on ${kind}`);
    }
    const ours: number[] = [];
    const theirs: number[] = [];
    for (let round = 0; round < SPEED_ROUNDS; round++) {
      for (const [count, into] of [
        [encodeOrdinary, ours],
        [lenml, theirs],
      ] as const) {
        const batch = texts();
        const started = performance.now();
        for (const text of batch) count(text);
        into.push((performance.now() - started) / batch.length);
      }
    }
    return { kind, oursMs: median(ours.slice(2)), lenmlMs: median(theirs.slice(2)) };
  });
}

async function main(): Promise<void> {
  console.log(`# Token meter benchmark\n\n${machineLine()}`);
  const samples = await accuracy();
  const meterStats = stats(samples, (s) => s.meter);
  const heuristicStats = stats(samples, (s) => s.heuristic);
  const o200kStats = stats(samples, (s) => s.o200k);
  const calibratedStats = stats(samples, (s) => s.o200kCalibrated);
  const exactTotal = samples.reduce((sum, s) => sum + s.exact, 0);

  printTable(
    `Accuracy against the fake server's DeepSeek V3 prompt_tokens (${samples.length} requests over HTTP, ${exactTotal.toLocaleString('en-US')} tokens)`,
    [
      { name: 'meter mean |error|', value: fmtPct(meterStats.mean), target: '≤ 1%', met: meterStats.mean <= 1 },
      { name: 'meter max |error|', value: fmtPct(meterStats.max), target: '≤ 3%', met: meterStats.max <= 3 },
    ],
  );
  const rows = [
    ['meter (DeepSeek V3 + template)', fmtPct(meterStats.mean), fmtPct(meterStats.max)],
    ['4 chars/token heuristic (§7.1)', fmtPct(heuristicStats.mean), fmtPct(heuristicStats.max)],
    ['o200k_base + OpenAI overhead', fmtPct(o200kStats.mean), fmtPct(o200kStats.max)],
    [
      `o200k_base + calibration (learned on first ${CALIBRATION_REQUESTS})`,
      fmtPct(calibratedStats.mean),
      fmtPct(calibratedStats.max),
    ],
  ];
  printGrid('Estimators side by side (mean / max absolute error)', ['estimator', 'mean', 'max'], rows);
  const perCategory = CATEGORIES.map((c) => {
    const group = samples.filter((s) => s.category === c.name);
    return [
      c.name,
      String(group.length),
      fmtPct(stats(group, (s) => s.meter).mean),
      fmtPct(stats(group, (s) => s.heuristic).mean),
      fmtPct(stats(group, (s) => s.o200k).mean),
    ];
  });
  printGrid('Mean |error| by corpus category', ['category', 'requests', 'meter', 'heuristic', 'o200k'], perCategory);

  const c = cost();
  const ratio = (c.incrementalMs / c.fullMs) * 100;
  printTable(
    `measure() cost on a ${c.messages.toLocaleString('en-US')}-message session (${c.promptTokens.toLocaleString('en-US')} prompt tokens)`,
    [
      { name: 'measure() after appending one message (median)', value: fmtMs(c.incrementalMs) },
      { name: 'full recount: fresh meter (median)', value: fmtMs(c.fullMs) },
      { name: 'incremental / full', value: `${ratio.toFixed(2)}%`, target: '≤ 5%', met: ratio <= 5 },
      { name: 'exact whole-request count (deepseekPromptTokenIds)', value: fmtMs(c.exactCountMs) },
    ],
  );
  const speed = countingSpeed();
  printGrid(
    `Counting a ${SPEED_CHARS.toLocaleString('en-US')}-character reply: encodeOrdinary against lenml's own pipeline (same ids; median of ${SPEED_ROUNDS - 2} rounds of ${SPEED_TEXTS} texts)`,
    ['text', 'encodeOrdinary', "lenml's pipeline", 'ours ÷ lenml'],
    speed.map((r) => [r.kind, fmtMs(r.oursMs), fmtMs(r.lenmlMs), `${((r.oursMs / r.lenmlMs) * 100).toFixed(0)}%`]),
  );
  disposeTokenizers();
}

await main();
