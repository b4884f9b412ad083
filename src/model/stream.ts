/**
 * Streaming a completion into our types (DESIGN §5, §7): provider deltas are coalesced into
 * `StreamChunk`s for the log (so clients see tokens live without one event per token), and
 * the finished reply is returned as content blocks plus usage.
 */
import type OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsStreaming } from 'openai/resources/chat/completions';
import type { CompletionUsage } from 'openai/resources/completions';
import type { ContentBlock, StreamChunk, TokenUsage } from '../session/messages.js';
import { ModelCallError, classifyModelError, modelFailure } from './errors.js';
import type { PartialCompletion } from './errors.js';
import type { ChatRequestBody } from './request.js';
import { assistantBlocks } from './request.js';
import { completionChunks } from './event-stream.js';

/** When buffered deltas are handed to `onChunks`: the one coalescing setting of a model call. */
export type CoalesceOptions = {
  /**
   * Deliver buffered deltas this long after the first of them arrived. Default 100 ms: ten
   * updates a second for a live follower, and half the durable commits of 50 ms (a reply
   * streamed at ~500 characters/s took 52 commits at 50 ms, 28 at 100 ms).
   */
  maxDelayMs: number;
  /**
   * Deliver as soon as this many characters are buffered: a cap on one chunk's size when a
   * burst arrives faster than the window. Default 4096. Each delivery is a durable log append,
   * so a low cap turns a fast stream into many commits (512 made four of a 1,600-character
   * reply that arrived in 20 ms); a model streaming at its usual rate never reaches it.
   */
  maxChars: number;
};

export const DEFAULT_COALESCE: CoalesceOptions = { maxDelayMs: 100, maxChars: 4096 };

export type StreamCompletionOptions = {
  client: OpenAI;
  request: ChatRequestBody;
  signal?: AbortSignal;
  /**
   * Receives coalesced chunks in order, a batch at a time; awaited. While a delivery is in
   * flight, new deltas keep merging into the next batch (a slow consumer gets fewer, larger
   * batches, never a backlog of small ones).
   */
  onChunks?: (chunks: StreamChunk[]) => void | Promise<void>;
  /** Called once, when the first delta arrives (before coalescing delays it). */
  onFirstDelta?: () => void;
  coalesce?: Partial<CoalesceOptions>;
  /**
   * When the stream completes, return the chunks still buffered in `heldChunks` instead of
   * delivering them, so the caller can log them in the same commit as the reply (one durable
   * append fewer per reply). An aborted or failed stream delivers them as usual.
   */
  holdLastChunks?: boolean;
  /** Fail with `timeout` when no delta arrives for this long (default: no idle limit). */
  idleTimeoutMs?: number;
};

/** A finished (or user-aborted) completion. */
export type CompletionResult = {
  /** Reasoning block, text block, then tool-call blocks with complete argument strings. */
  content: ContentBlock[];
  finishReason: string | null;
  usage?: TokenUsage;
  /** True when the caller's signal aborted the stream; `content` is what had arrived. */
  aborted: boolean;
  /** With `holdLastChunks`: the coalesced chunks not delivered to `onChunks`, in order. */
  heldChunks?: StreamChunk[];
};

type ToolCallAccumulator = { id: string; name: string; arguments: string };

/** Accumulates deltas into the final blocks. */
class ReplyAccumulator {
  reasoning = '';
  text = '';
  readonly toolCalls: ToolCallAccumulator[] = [];
  add(chunk: StreamChunk): void {
    switch (chunk.kind) {
      case 'text-delta':
        this.text += chunk.text;
        break;
      case 'reasoning-delta':
        this.reasoning += chunk.text;
        break;
      case 'tool-call-delta': {
        const call = (this.toolCalls[chunk.index] ??= { id: '', name: '', arguments: '' });
        if (chunk.id) call.id = chunk.id;
        if (chunk.name) call.name += chunk.name;
        call.arguments += chunk.argumentsDelta;
        break;
      }
    }
  }
  blocks(): ContentBlock[] {
    return assistantBlocks({ reasoning: this.reasoning, text: this.text, toolCalls: this.toolCalls.filter(Boolean) });
  }
  partial(): PartialCompletion {
    return { content: this.blocks() };
  }
}

/**
 * Merges consecutive deltas of the same kind (same tool-call index) and delivers them in
 * batches: after `maxDelayMs`, at `maxChars`, or when the stream ends.
 */
class ChunkCoalescer {
  private buffered: StreamChunk[] = [];
  private size = 0;
  private timer: NodeJS.Timeout | undefined;
  private delivering: Promise<void> | undefined;
  private wanted = false;
  private held = false;
  private failure: { error: unknown } | undefined;

  constructor(
    private readonly options: CoalesceOptions,
    private readonly deliver: ((chunks: StreamChunk[]) => void | Promise<void>) | undefined,
  ) {}

  push(chunk: StreamChunk): void {
    if (!this.deliver) return;
    const last = this.buffered[this.buffered.length - 1];
    const merged = last && mergeChunks(last, chunk);
    if (merged) this.buffered[this.buffered.length - 1] = merged;
    else this.buffered.push(chunk);
    this.size += chunkSize(chunk);
    this.timer ??= setTimeout(() => this.flush(), this.options.maxDelayMs);
    if (this.size >= this.options.maxChars) this.flush();
  }

  /** Delivers what is buffered now, or as soon as the delivery in flight completes. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.held) return;
    if (this.delivering) {
      this.wanted = true;
      return;
    }
    if (this.buffered.length === 0 || !this.deliver || this.failure) return;
    const batch = this.buffered;
    this.buffered = [];
    this.size = 0;
    const deliver = this.deliver;
    this.delivering = (async () => {
      try {
        await deliver(batch);
      } catch (error) {
        this.failure = { error };
      }
    })().finally(() => {
      this.delivering = undefined;
      if (this.wanted) {
        this.wanted = false;
        this.flush();
      }
    });
  }

  /** Delivers everything buffered and waits for every delivery; rethrows a consumer failure. */
  async drain(): Promise<void> {
    this.flush();
    while (this.delivering) {
      await this.delivering;
      this.flush();
    }
    if (this.failure) throw this.failure.error;
  }

  /**
   * Stops delivering, waits for the delivery in flight, and returns what is still buffered
   * (not delivered); rethrows a consumer failure.
   */
  async hold(): Promise<StreamChunk[]> {
    this.held = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    while (this.delivering) await this.delivering;
    if (this.failure) throw this.failure.error;
    const rest = this.buffered;
    this.buffered = [];
    this.size = 0;
    return rest;
  }

  consumerFailed(): boolean {
    return this.failure !== undefined;
  }
}

function chunkSize(chunk: StreamChunk): number {
  return chunk.kind === 'tool-call-delta' ? chunk.argumentsDelta.length : chunk.text.length;
}

function mergeChunks(a: StreamChunk, b: StreamChunk): StreamChunk | undefined {
  if (a.kind === 'text-delta' && b.kind === 'text-delta') return { kind: 'text-delta', text: a.text + b.text };
  if (a.kind === 'reasoning-delta' && b.kind === 'reasoning-delta')
    return { kind: 'reasoning-delta', text: a.text + b.text };
  if (
    a.kind === 'tool-call-delta' &&
    b.kind === 'tool-call-delta' &&
    a.index === b.index &&
    (b.id === undefined || b.id === a.id)
  ) {
    const merged: StreamChunk = {
      kind: 'tool-call-delta',
      index: a.index,
      argumentsDelta: a.argumentsDelta + b.argumentsDelta,
    };
    if (a.id !== undefined) merged.id = a.id;
    const name = (a.name ?? '') + (b.name ?? '');
    if (name !== '') merged.name = name;
    return merged;
  }
  return undefined;
}

/** DeepSeek's delta and usage extensions of the OpenAI chunk. */
type WireDelta = ChatCompletionChunk.Choice.Delta & { reasoning_content?: string | null };
type WireUsage = CompletionUsage & { prompt_cache_hit_tokens?: number; prompt_cache_miss_tokens?: number };

function chunksOfDelta(delta: WireDelta): StreamChunk[] {
  const chunks: StreamChunk[] = [];
  if (delta.reasoning_content) chunks.push({ kind: 'reasoning-delta', text: delta.reasoning_content });
  if (delta.content) chunks.push({ kind: 'text-delta', text: delta.content });
  for (const call of delta.tool_calls ?? []) {
    const chunk: StreamChunk = {
      kind: 'tool-call-delta',
      index: call.index,
      argumentsDelta: call.function?.arguments ?? '',
    };
    if (call.id) chunk.id = call.id;
    if (call.function?.name) chunk.name = call.function.name;
    chunks.push(chunk);
  }
  return chunks;
}

/**
 * Maps provider usage to our disjoint buckets: `inputTokens` is the uncached part of the
 * prompt, `cacheReadTokens` the cached part (DeepSeek `prompt_cache_hit_tokens`, or OpenAI
 * `prompt_tokens_details.cached_tokens`).
 */
export function mapUsage(usage: WireUsage): TokenUsage {
  const cached = usage.prompt_cache_hit_tokens ?? usage.prompt_tokens_details?.cached_tokens;
  const mapped: TokenUsage = {
    inputTokens: usage.prompt_tokens - (cached ?? 0),
    outputTokens: usage.completion_tokens,
  };
  if (cached !== undefined) mapped.cacheReadTokens = cached;
  const reasoning = usage.completion_tokens_details?.reasoning_tokens;
  if (reasoning !== undefined && reasoning !== null) mapped.reasoningTokens = reasoning;
  return mapped;
}

/**
 * Calls the model with `stream: true` and usage included, hands coalesced chunks to
 * `onChunk`, and returns the finished blocks, finish reason and usage.
 *
 * - Aborting `signal` ends the call early and resolves with `aborted: true` and what had
 *   streamed so far.
 * - Any failure rejects with a `ModelCallError` carrying the classified failure and the
 *   partial output (`error.partial`).
 */
export async function streamCompletion(options: StreamCompletionOptions): Promise<CompletionResult> {
  const coalesce: CoalesceOptions = { ...DEFAULT_COALESCE, ...options.coalesce };
  const accumulator = new ReplyAccumulator();
  const coalescer = new ChunkCoalescer(coalesce, options.onChunks);
  const controller = new AbortController();
  const onAbort = () => controller.abort(options.signal?.reason);
  if (options.signal?.aborted) return { content: [], finishReason: null, aborted: true };
  options.signal?.addEventListener('abort', onAbort, { once: true });

  // One timer for the whole stream, not one per chunk (a reply streams ~a chunk per token): data
  // moves the deadline, and the timer, when it fires, waits again for what is left of it.
  const idleMs = options.idleTimeoutMs;
  let idleTimer: NodeJS.Timeout | undefined;
  let idleExpired = false;
  let lastDataAt = 0;
  const onIdleTimer = () => {
    const left = lastDataAt + idleMs! - performance.now();
    if (left > 0) {
      idleTimer = setTimeout(onIdleTimer, left);
      return;
    }
    idleExpired = true;
    controller.abort(new Error('idle timeout'));
  };
  const armIdle = () => {
    if (idleMs === undefined) return;
    lastDataAt = performance.now();
    idleTimer ??= setTimeout(onIdleTimer, idleMs);
  };

  let finishReason: string | null = null;
  let usage: TokenUsage | undefined;
  let firstDelta = options.onFirstDelta;
  try {
    armIdle();
    const request = {
      ...options.request,
      stream: true,
      stream_options: { include_usage: true },
    } as ChatCompletionCreateParamsStreaming;
    // The raw response, read by completionChunks (event-stream.ts); status errors still come from the client.
    const response = await options.client.chat.completions.create(request, { signal: controller.signal }).asResponse();
    reading: for await (const chunks of completionChunks(response, controller.signal)) {
      armIdle();
      for (const chunk of chunks) {
        for (const choice of chunk.choices) {
          for (const piece of chunksOfDelta(choice.delta as WireDelta)) {
            firstDelta?.();
            firstDelta = undefined;
            accumulator.add(piece);
            coalescer.push(piece);
          }
          if (choice.finish_reason) finishReason = choice.finish_reason;
        }
        if (chunk.usage) usage = mapUsage(chunk.usage as WireUsage);
        if (coalescer.consumerFailed()) break reading;
      }
    }
  } catch (error) {
    await drainQuietly(coalescer);
    if (idleExpired) {
      throw new ModelCallError(
        modelFailure('timeout', `no data from the model for ${options.idleTimeoutMs} ms`),
        accumulator.partial(),
        { cause: error },
      );
    }
    if (options.signal?.aborted) return abortedResult(accumulator, finishReason, usage);
    throw new ModelCallError(classifyModelError(error), accumulator.partial(), { cause: error });
  } finally {
    if (idleTimer) clearTimeout(idleTimer);
    options.signal?.removeEventListener('abort', onAbort);
  }
  // The openai stream ends quietly (no throw) when its signal aborts, so check why it ended.
  if (idleExpired) {
    await drainQuietly(coalescer);
    throw new ModelCallError(
      modelFailure('timeout', `no data from the model for ${options.idleTimeoutMs} ms`),
      accumulator.partial(),
    );
  }
  const held =
    options.holdLastChunks && options.onChunks && !options.signal?.aborted
      ? await coalescer.hold()
      : (await coalescer.drain(), undefined);
  if (options.signal?.aborted) return abortedResult(accumulator, finishReason, usage);
  const result: CompletionResult = { content: accumulator.blocks(), finishReason, aborted: false };
  if (usage) result.usage = usage;
  if (held) result.heldChunks = held;
  return result;
}

function abortedResult(
  accumulator: ReplyAccumulator,
  finishReason: string | null,
  usage: TokenUsage | undefined,
): CompletionResult {
  const result: CompletionResult = { content: accumulator.blocks(), finishReason, aborted: true };
  if (usage) result.usage = usage;
  return result;
}

async function drainQuietly(coalescer: ChunkCoalescer): Promise<void> {
  try {
    await coalescer.drain();
  } catch {
    // The model call already failed; its error is the one to report, not the consumer's.
  }
}
