/**
 * The token meter and pruning with media (issue 50): the meter prices the request the media
 * policy sends (checked against the offline model's reported prompt tokens for the same request),
 * an older image's price falls to its stand-in's, and pruning and spill keep media blocks.
 */
import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_MEDIA_POLICY, applyMediaPolicy, mediaStandIn } from '../../src/context/media-policy.js';
import { planPrune, resolvePrunerConfig } from '../../src/context/pruner.js';
import { createTokenMeter } from '../../src/context/token-meter.js';
import { disposeTokenizers } from '../../src/context/tokenizers.js';
import { DEFAULT_MODEL_CATALOGUE, lookupModel } from '../../src/model/catalogue.js';
import { imageTokens } from '../../src/model/media-tokens.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import type { ImageBlock, RequestHeader, Session, StoredMedia, UserMessage } from '../../src/session/index.js';
import { useFakeModel } from '../support/fake-model.js';
import { png, PDF_MINIMAL } from '../support/media.js';
import { TEST_SYSTEM, TEST_TOOLS, meterSession } from './meter-conversations.js';

afterAll(() => disposeTokenizers());
const fake = useFakeModel();

const SESSION = 'meter-media';
const TIME = 1_700_000_000_000;
const bytesByLocator = new Map<string, Uint8Array>();

function stored(bytes: Uint8Array, mediaType: 'image/png' | 'application/pdf', size?: [number, number]): StoredMedia {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const locator = `artifact:${SESSION}/media-${sha256}.${mediaType === 'image/png' ? 'png' : 'pdf'}`;
  bytesByLocator.set(locator, bytes);
  return {
    kind: 'artifact',
    locator,
    mediaType,
    bytes: bytes.byteLength,
    sha256,
    ...(size ? { width: size[0], height: size[1] } : {}),
  };
}

function pngBlock(width: number, height: number, detail?: ImageBlock['detail']): ImageBlock {
  return {
    type: 'image',
    source: stored(png(width, height), 'image/png', [width, height]),
    ...(detail ? { detail } : {}),
  };
}

/** One turn: a user message with `media`, a reply, optionally a tool call answered by a result holding `resultMedia`. */
function appendTurn(session: Session, turn: number, media: ImageBlock[], resultMedia?: ImageBlock[]): void {
  session.append({ type: 'turn/start', time: TIME, data: { turn } });
  session.append({
    type: 'user/message',
    time: TIME,
    data: {
      id: `u${turn}`,
      role: 'user',
      content: [{ type: 'text', text: `turn ${turn}: what is in this picture?` }, ...media],
      source: { kind: 'user' },
    },
    surfaceOp: 'append',
  });
  session.append({ type: 'step/start', time: TIME, data: { turn, step: 1 } });
  const callId = `call-${turn}`;
  session.append({
    type: 'assistant/message',
    time: TIME,
    data: {
      turn,
      step: 1,
      message: {
        id: `a${turn}`,
        role: 'assistant',
        content: resultMedia
          ? [{ type: 'tool-call', id: callId, name: 'read_file', arguments: '{"path":"x.png"}' }]
          : [{ type: 'text', text: `A red square, turn ${turn}.` }],
        source: { kind: 'model', provider: 'fake', model: 'fake' },
      },
    },
    surfaceOp: 'append',
    sourceEventSeqs: [],
  });
  if (!resultMedia) {
    session.append({ type: 'step/end', time: TIME, data: { turn, step: 1 } });
    session.append({ type: 'turn/end', time: TIME, data: { turn, reason: { kind: 'completed' } } });
    return;
  }
  session.append({
    type: 'tool/call',
    time: TIME,
    data: { turn, step: 1, callId, name: 'read_file', arguments: '{"path":"x.png"}' },
  });
  session.append({
    type: 'tool/result',
    time: TIME,
    data: {
      turn,
      step: 1,
      message: {
        id: `t${turn}`,
        role: 'user',
        content: [
          { type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: 'x.png' }, ...resultMedia] },
        ],
        source: { kind: 'tool', callId },
      },
    },
    surfaceOp: 'append',
  });
  session.append({ type: 'step/end', time: TIME, data: { turn, step: 1 } });
}

/** The prompt tokens the offline model reports for the request the session sends now (the step's policy applied). */
async function reportedPromptTokens(session: Session, header: RequestHeader): Promise<number> {
  const provider = createOpenAIProvider({ baseURL: fake().baseURL, apiKey: 'k' });
  const inputs = lookupModel(DEFAULT_MODEL_CATALOGUE, header.model).input;
  const messages = applyMediaPolicy(session.deriveMessages(), DEFAULT_MEDIA_POLICY, inputs);
  await provider.stream({ messages, header, readMedia: async (locator) => bytesByLocator.get(locator)! });
  return fake().reportedUsage().at(-1)!.prompt_tokens;
}

const HEADER: RequestHeader = { provider: 'fake', model: 'fake', system: TEST_SYSTEM, tools: TEST_TOOLS };

describe('the meter with media (issue 50)', () => {
  it("equals the offline model's prompt tokens for the request the policy sends: recent images by the tile rule, older ones as stand-ins, the tool round's", async () => {
    const session = meterSession(SESSION);
    const meter = createTokenMeter();
    appendTurn(session, 1, [pngBlock(1024, 1024)]);
    appendTurn(session, 2, [
      pngBlock(2048, 4096, 'high'),
      { type: 'file', source: stored(PDF_MINIMAL, 'application/pdf') } as never,
    ]);
    appendTurn(session, 3, [pngBlock(64, 48, 'low')]);
    expect(meter.measure(session, HEADER).totalTokens).toBe(await reportedPromptTokens(session, HEADER));
    appendTurn(session, 4, [], [pngBlock(800, 600)]);
    const measured = meter.measure(session, HEADER);
    expect(measured.totalTokens).toBe(await reportedPromptTokens(session, HEADER));
    expect(
      fake()
        .chatRequests()
        .at(-1)!
        .messages.map((m) => m.role),
    ).toEqual([
      'system',
      'user',
      'assistant',
      'user',
      'assistant',
      'user',
      'assistant',
      'user',
      'assistant',
      'tool',
      'user',
    ]);
  });

  it("drops an image's price to its stand-in's once it is older than the last N user turns", () => {
    const session = meterSession(SESSION);
    const meter = createTokenMeter();
    const first = pngBlock(1024, 1024);
    appendTurn(session, 1, [first]);
    appendTurn(session, 2, []);
    appendTurn(session, 3, []);
    const firstSeq = session.surfaceNodes[0]!;
    const before = meter.measure(session, HEADER).nodes.find((n) => n.seq === firstSeq)!.tokens;
    appendTurn(session, 4, []);
    const after = meter.measure(session, HEADER).nodes.find((n) => n.seq === firstSeq)!.tokens;
    const standIn = session.deriveMessages()[0] as UserMessage;
    const asStandIn: UserMessage = {
      ...standIn,
      content: [standIn.content[0]!, { type: 'text' as const, text: `\n${mediaStandIn(first, 'older').text}` }],
    };
    expect(after).toBe(meter.messageTokens(asStandIn, 'fake'));
    expect(before - after).toBe(
      imageTokens(1024, 1024) -
        (meter.messageTokens(asStandIn, 'fake') -
          meter.messageTokens({ ...standIn, content: [standIn.content[0]!] }, 'fake')),
    );
    const fresh = createTokenMeter().measure(session, HEADER);
    expect(meter.measure(session, HEADER)).toEqual(fresh);
  });

  it('prices media as stand-ins for a model that takes none, as the request to it carries them', async () => {
    const session = meterSession(SESSION);
    appendTurn(session, 1, [pngBlock(1024, 1024)]);
    const header: RequestHeader = { provider: 'fake', model: 'deepseek-chat', system: TEST_SYSTEM };
    expect(createTokenMeter().measure(session, header).totalTokens).toBe(await reportedPromptTokens(session, header));
    expect(JSON.stringify(fake().chatRequests().at(-1)!.messages)).toContain(
      'not sent: this model does not take images',
    );
  });
});

describe('pruning with media (issue 50)', () => {
  it('cuts the text of a long tool result and keeps its media blocks in order, also when escalation spills it', () => {
    const session = meterSession(SESSION);
    const image = pngBlock(32, 32);
    appendTurn(session, 1, [], [image]);
    const resultSeq = session.surfaceNodes.at(-1)!;
    const event = session.eventAt(resultSeq)!;
    // A long result: rewrite the logged one's text in a copy of the session's events.
    const long = meterSession(SESSION);
    for (let seq = 0; seq < session.nextSeq; seq++) {
      const e = session.eventAt(seq)!;
      const { seq: _seq, ...rest } = e;
      if (seq !== resultSeq) {
        long.append(rest as never);
        continue;
      }
      const data = (event as Extract<typeof event, { type: 'tool/result' }>).data;
      const block = data.message.content[0];
      long.append({
        ...(rest as object),
        data: {
          ...data,
          meta: { locator: `artifact:${SESSION}/read_file-call-1.txt`, bytes: 50_000 },
          message: {
            ...data.message,
            content: [{ ...block, content: [{ type: 'text', text: 'x'.repeat(50_000) }, image] }],
          },
        },
      } as never);
    }
    const config = resolvePrunerConfig({ thresholdChars: 2000, headChars: 1000, tailChars: 500 });
    for (const escalation of [false, true]) {
      const planned = planPrune(long, config, () => 1, TIME, { escalation });
      const replacement = planned.find((e) => e.type === 'tool/result')!;
      const inner = (replacement.data as { message: { content: [{ content: Array<{ type: string }> }] } }).message
        .content[0].content;
      expect(inner.map((b) => b.type)).toEqual(['text', 'image']);
      expect(inner[1]).toEqual(image);
    }
  });
});
