/**
 * The token meter (DESIGN §6, dsh-spec §7): what the request a session would send now costs in
 * the routed model's tokens.
 *
 * - Prices come from the model family's own offline tokenizer and chat template
 *   (`tokenizers.ts`), split into an envelope (system, tools, fixed template tokens) and one
 *   price per surface node, so `headerTokens + Σ node prices` is the whole request's count.
 * - Node prices are cached per session and per model in a fold that consumes only new events:
 *   after an append, a measurement tokenizes just the new content. A replacement reprices only
 *   the inserted node and its successor (whose template context may have changed).
 * - Provider usage anchors the total when the request envelope is unchanged since the reply
 *   that reported it: `total = promptTokens(reply) + (surfaceNow − surfaceBefore(reply))`.
 *   The anchor is the prompt the reply was generated from, so the reply itself and everything
 *   after it are priced by the meter (no step-start double count, and no hidden reasoning
 *   counted as context). Usage below the meter's own estimate is ignored (never anchor low).
 * - Models whose tokenizer is only an approximation are corrected by a per-model
 *   estimate/usage ratio learned from real responses (`UsageCalibration`).
 * - Media (issue 50): the meter prices what the media policy (media-policy.ts) sends. A node
 *   holding media has two cached prices, with its media (text, plus each image by OpenAI's tile
 *   rule and each file by a stated estimate: model/media-tokens.ts) and with stand-ins; which one
 *   counts depends on the nodes after it, so while the surface holds media a catch-up re-applies
 *   the policy to all nodes once (arithmetic over cached prices, no tokenizing).
 */
import { buildChatRequest } from '../model/request.js';
import {
  DEFAULT_MODEL_CATALOGUE,
  ModelCatalogueError,
  TEXT_ONLY_INPUT,
  lookupModel,
  type ModelCatalogue,
  type ResolvedModel,
  type TokenizerFamily,
} from '../model/catalogue.js';
import type { TemplateMessage } from '../model/deepseek-tokens.js';
import {
  applySurfaceChange,
  deriveEventMessage,
  surfaceChange,
  type ContentBlock,
  type Message,
  type RequestHeader,
  type SessionEvent,
  type SessionView,
} from '../session/index.js';
import type { NodePrice, TokenMeasurement, TokenMeter } from './meter-types.js';
import {
  DEFAULT_MEDIA_POLICY,
  holdsMedia,
  mediaRoleOf,
  mediaSentMask,
  messageForRequest,
  type MediaPolicy,
  type MediaRole,
} from './media-policy.js';
import { fileBlockTokens, imageBlockTokens } from '../model/media-tokens.js';
import { familyEstimator, type FamilyEstimator, type StandalonePrice } from './tokenizers.js';

// ---- errors -------------------------------------------------------------------------------

export type TokenMeterErrorCode = 'METER_OUT_OF_SYNC';

/** A meter failure with a stable code. */
export class TokenMeterError extends Error {
  constructor(
    readonly code: TokenMeterErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'TokenMeterError';
  }
}

// ---- usage calibration --------------------------------------------------------------------

/** One observation: what the meter estimated for a request and what the provider billed. */
export type CalibrationSample = {
  /** The model name as in the request header. */
  model: string;
  /** The meter's uncalibrated estimate of the request (`MeterMeasurement.uncalibratedTokens`). */
  estimatedPromptTokens: number;
  /** The provider's prompt total: input + cache read + cache write. */
  reportedPromptTokens: number;
};

export type UsageCalibrationOptions = {
  /** How many recent samples per model the ratio is taken over. Default 16. */
  window?: number;
  /** Samples whose estimate/usage ratio lies outside [1/maxSkew, maxSkew] are discarded as bogus. Default 2. */
  maxSkew?: number;
};

/**
 * The per-model ratio estimate/usage, learned from real responses (DESIGN §6). The ratio is
 * Σ estimated / Σ reported over the latest `window` accepted samples; the meter divides its
 * raw counts by it for models whose tokenizer is only approximate. Shared and mutable: one
 * instance is fed by the model activity and read by every meter built with it.
 */
export class UsageCalibration {
  private readonly window: number;
  private readonly maxSkew: number;
  private readonly samples = new Map<string, Array<{ estimated: number; reported: number }>>();

  constructor(options: UsageCalibrationOptions = {}) {
    this.window = options.window ?? 16;
    this.maxSkew = options.maxSkew ?? 2;
  }

  /** Adds a sample; returns false (and learns nothing) when it is not a plausible measurement. */
  record(sample: CalibrationSample): boolean {
    const { estimatedPromptTokens: estimated, reportedPromptTokens: reported } = sample;
    if (!Number.isFinite(estimated) || !Number.isFinite(reported) || estimated <= 0 || reported <= 0) return false;
    const skew = estimated / reported;
    if (skew > this.maxSkew || skew < 1 / this.maxSkew) return false;
    let list = this.samples.get(sample.model);
    if (!list) this.samples.set(sample.model, (list = []));
    list.push({ estimated, reported });
    if (list.length > this.window) list.shift();
    return true;
  }

  /** estimate/usage for `model`, or undefined before its first accepted sample. */
  ratio(model: string): number | undefined {
    const list = this.samples.get(model);
    if (!list || list.length === 0) return undefined;
    let estimated = 0;
    let reported = 0;
    for (const s of list) {
      estimated += s.estimated;
      reported += s.reported;
    }
    return estimated / reported;
  }

  /** The factor raw counts for `model` are multiplied by (1 / ratio; 1 when unknown). */
  correction(model: string): number {
    const ratio = this.ratio(model);
    return ratio === undefined ? 1 : 1 / ratio;
  }

  /** Current ratios and sample counts, for diagnostics. */
  snapshot(): Record<string, { ratio: number; samples: number }> {
    const out: Record<string, { ratio: number; samples: number }> = {};
    for (const [model, list] of this.samples)
      if (list.length > 0) out[model] = { ratio: this.ratio(model)!, samples: list.length };
    return out;
  }
}

// ---- meter types --------------------------------------------------------------------------

/** The usage anchor a measurement was based on. */
export type MeterAnchor = {
  /** Seq of the `assistant/message` whose usage is the anchor. */
  seq: number;
  /** The provider's prompt total for that reply's request (input + cache read + cache write). */
  promptTokens: number;
  /** The meter's surface tokens the request was made with (the surface just before the reply). */
  surfaceTokens: number;
};

/** A measurement with the meter's working shown. */
export type MeterMeasurement = TokenMeasurement & {
  /** The model name measured for (the header's). */
  model: string;
  family: TokenizerFamily;
  /** `headerTokens + surfaceTokens`: the meter's own count, whatever the baseline. */
  estimatedTokens: number;
  /** The same before calibration: feed this to `UsageCalibration.record` as `estimatedPromptTokens`. */
  uncalibratedTokens: number;
  /** The factor raw tokenizer counts were multiplied by (1 for exact models or without samples). */
  calibration: number;
  /** Present when `baseline === 'usage'`: `totalTokens = max(0, promptTokens + surfaceTokens − anchor.surfaceTokens)`. */
  anchor?: MeterAnchor;
};

/** The meter with its measurement detail and calibration exposed. */
export interface SessionTokenMeter extends TokenMeter {
  measure(session: SessionView, header: RequestHeader): MeterMeasurement;
  readonly calibration: UsageCalibration;
  /** The tokenizer family a model name is priced with (catalogue entry, else a guess from the name). */
  familyOf(model: string): TokenizerFamily;
}

export type TokenMeterOptions = {
  /** Resolves header model names to tokenizer families and request dialects. Default: the built-in catalogue. */
  catalogue?: ModelCatalogue;
  /** Shared usage calibration. Default: a fresh one. */
  calibration?: UsageCalibration;
  /**
   * Models whose tokenizer and template match the provider's count exactly, so calibration is
   * never applied. Default: the fake model server, which counts with the same DeepSeek V3 code.
   */
  isExact?: (model: ResolvedModel) => boolean;
  /** The media policy the engine applies to requests (the meter prices what is sent). Default `DEFAULT_MEDIA_POLICY`. */
  media?: MediaPolicy;
};

// ---- model pricing ------------------------------------------------------------------------

type ModelPricing = {
  resolved: ResolvedModel;
  estimator: FamilyEstimator;
  exact: boolean;
  /** Raw envelope prices by canonical header key. */
  envelopes: Map<string, number>;
};

/** Context windows do not matter to pricing; a guessed model gets a placeholder. */
const GUESSED_MODEL_LIMIT = 128_000;

function guessModel(name: string): ResolvedModel {
  const deepseek = /deepseek/i.test(name);
  return {
    id: name,
    requestedName: name,
    provider: deepseek ? 'deepseek' : 'openai',
    contextWindow: GUESSED_MODEL_LIMIT,
    maxOutput: GUESSED_MODEL_LIMIT,
    tokenizer: deepseek ? 'deepseek' : 'o200k',
    thinkingParam: deepseek,
    reasoningContent: deepseek,
    input: TEXT_ONLY_INPUT,
  };
}

function scale(raw: number, factor: number): number {
  return factor === 1 ? raw : Math.round(raw * factor);
}

/** Stable JSON (sorted keys): envelope equality must not depend on key order. */
function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record)
    .filter((k) => record[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(record[k])}`).join(',')}}`;
}

const envelopeKeys = new WeakMap<RequestHeader, string>();
function envelopeKey(header: RequestHeader): string {
  let key = envelopeKeys.get(header);
  if (key === undefined) {
    key = canonicalJson(header);
    envelopeKeys.set(header, key);
  }
  return key;
}

// ---- media ---------------------------------------------------------------------------------

/** Stands in for the bytes of every stored medium when pricing: the meter never reads them. */
const NO_BYTES = { get: () => new Uint8Array(0) };

/** The prompt tokens of the media `blocks` carry (tool results' too): the tile rule or a stated estimate. */
function mediaTokensOf(blocks: readonly ContentBlock[]): number {
  let tokens = 0;
  for (const block of blocks) {
    if (block.type === 'image') tokens += imageBlockTokens(block);
    else if (block.type === 'file') tokens += fileBlockTokens(block);
    else if (block.type === 'tool-result') tokens += mediaTokensOf(block.content);
  }
  return tokens;
}

// ---- per-session fold ---------------------------------------------------------------------

/** A message's prices: as sent without its media (stand-ins), and, when it holds media, with them. */
type NodePrices = { standalone: StandalonePrice; withMedia?: StandalonePrice };

type NodeEntry = {
  seq: number;
  /** The price with the message's media left out (stand-ins): the only price of a message without media. */
  standalone: StandalonePrice;
  /** The price with its media sent, for a message holding media. */
  withMedia?: StandalonePrice;
  /** How the media policy sees the message (undefined for an empty one). */
  role?: MediaRole;
  /** The price in use: `withMedia` when the policy sends the node's media now, else `standalone`. */
  current: StandalonePrice;
  /** Derives no wire message (an empty assistant reply): invisible to template neighbours. */
  empty: boolean;
  /** Raw price in context (standalone minus a shared tool-run bracket). */
  raw: number;
  frozen: NodePrice;
};

type FoldAnchor = { seq: number; promptTokens: number; rawSurface: number; envelope: string | undefined };

type NodesView = { revision: number; factor: number; nodes: readonly NodePrice[]; surfaceTokens: number };

/** The incremental price fold of one session for one model. */
class SurfacePriceFold {
  private consumed = 0;
  private readonly nodes: NodeEntry[] = [];
  /** The node seqs, mirroring `nodes` (the surface rule locates replacements by seq). */
  private readonly seqs: number[] = [];
  private rawSurface = 0;
  private envelope: string | undefined;
  private revision = 0;
  /** Surface nodes holding media: while there are any, a change re-applies the media policy to every node. */
  private mediaNodes = 0;
  /** The media policy must be re-applied before prices are read (once per catch-up, not per event). */
  private mediaDirty = false;
  private view: NodesView | undefined;
  anchor: FoldAnchor | undefined;

  constructor(
    private readonly price: (message: Message | null) => NodePrices,
    private readonly discount: number,
    private readonly recentTurns: number,
  ) {}

  /** Consumes the events appended since the last call. */
  catchUp(session: SessionView): void {
    const end = session.nextSeq;
    for (let seq = this.consumed; seq < end; seq++) {
      const event = session.eventAt(seq);
      if (event) this.apply(event);
    }
    this.consumed = end;
    if (this.mediaDirty) this.repriceAll();
    const surface = session.surfaceNodes;
    if (
      surface.length !== this.nodes.length ||
      (surface.length > 0 && surface[surface.length - 1] !== this.nodes[this.nodes.length - 1]!.seq)
    ) {
      throw new TokenMeterError(
        'METER_OUT_OF_SYNC',
        `token meter surface (${this.nodes.length} nodes) disagrees with session ${session.id} (${surface.length} nodes); this is a bug, report it with the session log`,
      );
    }
  }

  get logRevision(): number {
    return this.consumed;
  }

  /** Frozen node prices scaled by `factor`, rebuilt only when the surface or factor changed. */
  nodesView(factor: number): NodesView {
    if (this.view && this.view.revision === this.revision && this.view.factor === factor) return this.view;
    let surfaceTokens = 0;
    const nodes = this.nodes.map((entry) => {
      if (factor === 1) {
        surfaceTokens += entry.raw;
        return entry.frozen;
      }
      const tokens = scale(entry.raw, factor);
      surfaceTokens += tokens;
      return Object.freeze({ seq: entry.seq, tokens });
    });
    this.view = { revision: this.revision, factor, nodes: Object.freeze(nodes), surfaceTokens };
    return this.view;
  }

  get rawSurfaceTokens(): number {
    return this.rawSurface;
  }

  private apply(event: SessionEvent): void {
    if (event.type === 'request/header') {
      this.envelope = envelopeKey(event.data.header);
      return;
    }
    const change = surfaceChange(this.seqs, event);
    if (change === undefined) return;
    if (event.type === 'assistant/message' && event.data.usage) {
      // The anchor is the surface the reply's request was made from, as the policy sent it.
      if (this.mediaDirty) this.repriceAll();
      const usage = event.data.usage;
      const promptTokens = usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0);
      this.anchor = { seq: event.seq, promptTokens, rawSurface: this.rawSurface, envelope: this.envelope };
    }
    const message = deriveEventMessage(event);
    const { standalone, withMedia } = this.price(message);
    const entry: NodeEntry = {
      seq: event.seq,
      standalone,
      ...(withMedia ? { withMedia } : {}),
      ...(message ? { role: mediaRoleOf(message) } : {}),
      current: standalone,
      empty: message === null,
      raw: 0,
      frozen: { seq: event.seq, tokens: 0 },
    };
    this.revision++;
    const mediaBefore = this.mediaNodes;
    if (entry.withMedia) this.mediaNodes++;
    if (change.kind === 'replace') {
      for (let i = change.index; i < change.index + change.removed; i++) {
        this.rawSurface -= this.nodes[i]!.raw;
        if (this.nodes[i]!.withMedia) this.mediaNodes--;
      }
    }
    applySurfaceChange(this.seqs, change, event.seq);
    applySurfaceChange(this.nodes, change, entry);
    if (mediaBefore > 0 || this.mediaNodes > 0) {
      this.mediaDirty = true;
      return;
    }
    this.reprice(change.index);
    if (change.kind === 'replace') {
      const next = this.nextVisible(change.index + 1);
      if (next !== undefined) this.reprice(next);
    }
  }

  private nextVisible(from: number): number | undefined {
    for (let i = from; i < this.nodes.length; i++) if (!this.nodes[i]!.empty) return i;
    return undefined;
  }

  private previousVisible(before: number): NodeEntry | undefined {
    for (let i = before - 1; i >= 0; i--) if (!this.nodes[i]!.empty) return this.nodes[i];
    return undefined;
  }

  /**
   * Re-applies the media policy to the whole surface (which nodes send their media depends on
   * the nodes after them: a newer user turn, a reply ending the tool round) and reprices every
   * node. O(nodes) arithmetic, no tokenizing: both prices of a node are cached.
   */
  private repriceAll(): void {
    this.mediaDirty = false;
    const visible = this.nodes.filter((entry) => !entry.empty);
    const sent = mediaSentMask(
      visible.map((entry) => entry.role!),
      this.recentTurns,
    );
    visible.forEach((entry, i) => (entry.current = sent[i] && entry.withMedia ? entry.withMedia : entry.standalone));
    for (let i = 0; i < this.nodes.length; i++) this.reprice(i);
  }

  /** Recomputes node `index`'s price in its current context and adjusts the running total. */
  private reprice(index: number): void {
    const entry = this.nodes[index]!;
    const previous = this.previousVisible(index);
    const shared = entry.current.startsWithTool && previous?.current.endsWithTool === true;
    const raw = entry.current.tokens - (shared ? this.discount : 0);
    this.rawSurface += raw - entry.raw;
    entry.raw = raw;
    entry.frozen = Object.freeze({ seq: entry.seq, tokens: raw });
  }
}

// ---- the meter ----------------------------------------------------------------------------

/**
 * A token meter over `catalogue` (DESIGN §6). One meter may serve many sessions: its caches
 * are weakly keyed by `Session`, so a dropped session's prices are collected with it.
 */
export function createTokenMeter(options: TokenMeterOptions = {}): SessionTokenMeter {
  const catalogue = options.catalogue ?? DEFAULT_MODEL_CATALOGUE;
  const calibration = options.calibration ?? new UsageCalibration();
  const isExact = options.isExact ?? ((model: ResolvedModel) => model.provider === 'fake');
  const media = options.media ?? DEFAULT_MEDIA_POLICY;
  const pricings = new Map<string, ModelPricing>();
  const folds = new WeakMap<SessionView, Map<string, SurfacePriceFold>>();

  function pricingOf(model: string): ModelPricing {
    let pricing = pricings.get(model);
    if (pricing) return pricing;
    let resolved: ResolvedModel;
    let exact = false;
    try {
      resolved = lookupModel(catalogue, model);
      exact = isExact(resolved);
    } catch (error) {
      if (!(error instanceof ModelCatalogueError)) throw error;
      // An unknown model is priced by the family its name suggests; calibration corrects it.
      resolved = guessModel(model);
    }
    pricing = { resolved, estimator: familyEstimator(resolved.tokenizer), exact, envelopes: new Map() };
    pricings.set(model, pricing);
    return pricing;
  }

  function wireOf(message: Message, pricing: ModelPricing): readonly TemplateMessage[] {
    const header = { provider: pricing.resolved.provider, model: pricing.resolved.id };
    // Media parts carry no bytes here: their text is empty and their price is the tile rule's or a stated estimate.
    return buildChatRequest({ messages: [message], header, model: pricing.resolved, media: NO_BYTES })
      .messages as TemplateMessage[];
  }

  function pricesOf(message: Message | null, pricing: ModelPricing): NodePrices {
    if (message === null) return { standalone: { tokens: 0, startsWithTool: false, endsWithTool: false } };
    const inputs = pricing.resolved.input;
    const standalone = pricing.estimator.messagePrice(wireOf(messageForRequest(message, false, inputs), pricing));
    if (!holdsMedia(message.content)) return { standalone };
    const sent = messageForRequest(message, true, inputs);
    const wire = pricing.estimator.messagePrice(wireOf(sent, pricing));
    return { standalone, withMedia: { ...wire, tokens: wire.tokens + mediaTokensOf(sent.content) } };
  }

  function standalonePrice(message: Message | null, pricing: ModelPricing): StandalonePrice {
    const prices = pricesOf(message, pricing);
    return prices.withMedia ?? prices.standalone;
  }

  function rawEnvelope(header: RequestHeader, pricing: ModelPricing): number {
    const key = envelopeKey(header);
    let tokens = pricing.envelopes.get(key);
    if (tokens === undefined) {
      const body = buildChatRequest({ messages: [], header, model: pricing.resolved });
      tokens = pricing.estimator.envelopeTokens(body.messages as TemplateMessage[], body.tools);
      pricing.envelopes.set(key, tokens);
    }
    return tokens;
  }

  function factorOf(model: string, pricing: ModelPricing): number {
    return pricing.exact ? 1 : calibration.correction(model);
  }

  function foldOf(session: SessionView, model: string, pricing: ModelPricing): SurfacePriceFold {
    let perModel = folds.get(session);
    if (!perModel) folds.set(session, (perModel = new Map()));
    let fold = perModel.get(model);
    if (!fold) {
      fold = new SurfacePriceFold(
        (message) => pricesOf(message, pricing),
        pricing.estimator.toolRunDiscount,
        media.recentTurns,
      );
      perModel.set(model, fold);
    }
    return fold;
  }

  return {
    calibration,

    familyOf: (model) => pricingOf(model).resolved.tokenizer,

    messageTokens(message, model) {
      const pricing = pricingOf(model);
      return scale(standalonePrice(message, pricing).tokens, factorOf(model, pricing));
    },

    headerTokens(header) {
      const pricing = pricingOf(header.model);
      return scale(rawEnvelope(header, pricing), factorOf(header.model, pricing));
    },

    measure(session, header) {
      const pricing = pricingOf(header.model);
      const fold = foldOf(session, header.model, pricing);
      fold.catchUp(session);
      const factor = factorOf(header.model, pricing);
      const rawHeader = rawEnvelope(header, pricing);
      const headerTokens = scale(rawHeader, factor);
      const view = fold.nodesView(factor);
      const estimatedTokens = headerTokens + view.surfaceTokens;
      let totalTokens = estimatedTokens;
      let anchor: MeterAnchor | undefined;
      const candidate = fold.anchor;
      if (candidate && candidate.envelope === envelopeKey(header)) {
        const anchorSurface = scale(candidate.rawSurface, factor);
        // Usage below the meter's own count for the same request is not trusted (never anchor low).
        if (candidate.promptTokens >= headerTokens + anchorSurface) {
          anchor = Object.freeze({
            seq: candidate.seq,
            promptTokens: candidate.promptTokens,
            surfaceTokens: anchorSurface,
          });
          totalTokens = Math.max(0, candidate.promptTokens + view.surfaceTokens - anchorSurface);
        }
      }
      const measurement: MeterMeasurement = {
        logRevision: fold.logRevision,
        model: header.model,
        family: pricing.resolved.tokenizer,
        headerTokens,
        surfaceTokens: view.surfaceTokens,
        totalTokens,
        baseline: anchor ? 'usage' : 'estimated',
        nodes: view.nodes,
        estimatedTokens,
        uncalibratedTokens: rawHeader + fold.rawSurfaceTokens,
        calibration: factor,
        ...(anchor ? { anchor } : {}),
      };
      return Object.freeze(measurement);
    },
  };
}
