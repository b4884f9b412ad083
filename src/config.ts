/**
 * Configuration (DESIGN §9): environment variables and CLI flags, validated once at start-up
 * into a fully specified value. A bad setting fails loud, naming the setting and the fix.
 *
 * Validation only: nothing here opens a store or starts a model (that is src/compose.ts). What it
 * imports of ours is the vocabulary it validates against (the row of `config.ts` in
 * scripts/check-layers.mjs names each module and why).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { parseTokenGrants, type TokenGrant } from './gateway/access.js';
import { resolveListenerLimits, type ListenerLimits } from './gateway/listener-guard.js';
import { resolveGatewayTimeouts, type GatewayTimeouts } from './gateway/settings.js';
import {
  DEFAULT_MODEL_CATALOGUE,
  ModelCatalogueError,
  lookupModel,
  resolveModelCatalogue,
  type ModelCatalogue,
  type ModelCatalogueOverrides,
} from './model/catalogue.js';
import { DEFAULT_COALESCE } from './model/stream.js';
import { paceLimitsProblem, type PaceLimits } from './persistence/pacing.js';
import { ConfigError } from './session/errors.js';
import {
  DEFAULT_MAX_MEDIA_BYTES,
  MAX_BUDGET_WAIT_MS,
  MAX_MEDIA_BYTES_LIMIT,
  budgetProblem,
  isValidTenant,
  tenantCapsProblem,
  type Budget,
  type TenantCaps,
} from './session/index.js';
import { registerSecret } from './session/secrets.js';
import { parseApprovalPolicy, type ApprovalPolicy } from './tools/approval.js';
import { parseMcpServersJson, type McpServerConfig } from './tools/mcp/config.js';
import {
  DEFAULT_TASK_QUEUE,
  DEFAULT_TUNABLES,
  MAX_MESSAGE_BYTES_LIMIT,
  type SessionTunables,
} from './workflows/api.js';

export { ConfigError };

/**
 * The model part of the configuration: which model, at which endpoint with which key, and its
 * request settings.
 */
export type ModelSettings = {
  /** Model name from the catalogue (e.g. deepseek-flash) or `fake` for the offline model. */
  name: string;
  /** OpenAI-compatible base URL; unset with no key means the built-in offline model. */
  baseURL: string | undefined;
  apiKey: string | undefined;
  /** Provider name logged with each request. */
  provider: string;
  offline: boolean;
  system: string | undefined;
  thinking: boolean | undefined;
  reasoningEffort: string | undefined;
  maxTokens: number | undefined;
  timeoutMs: number;
};

/**
 * The whole configuration, validated: every environment variable (`CONFIG_VARIABLES`) and CLI flag
 * resolved to a value, from `resolveConfig`.
 */
export type Config = {
  store: string;
  temporalAddress: string | undefined;
  namespace: string;
  taskQueue: string;
  model: ModelSettings;
  gateway: {
    host: string;
    port: number;
    token: string | undefined;
    /** Tokens scoped to a tenant and rights (`SESSIONLOG_GATEWAY_TOKENS`, gateway/access.ts). */
    tokens: TokenGrant[];
    bodyLimitBytes: number;
    /** Signs LangGraph run webhooks (`SESSIONLOG_WEBHOOK_SECRET`); without it a run asking for a webhook is refused. */
    webhookSecret: string | undefined;
  } & GatewayTimeouts;
  /** Connection limits of every HTTP listener of the process (the gateway's, the worker's operations listener). */
  listenerLimits: ListenerLimits;
  tunables: SessionTunables;
  /** Tool output above this many UTF-8 bytes is spilled to an artifact behind a preview. */
  spillMaxInlineBytes: number;
  /** Streamed chunks are coalesced into one log append per this window. */
  chunkFlushMs: number;
  /** The model catalogue: the built-in one, extended or overridden by the file SESSIONLOG_MODELS names. */
  catalogue: ModelCatalogue;
  /** What a request naming a model the workers cannot run gets: the default model, or a refusal (SESSIONLOG_UNKNOWN_MODELS). */
  unknownModels: 'default' | 'refuse';
  /** Which tool calls wait for a person's approval by default. */
  approval: ApprovalPolicy;
  /** MCP servers whose tools the worker offers (SESSIONLOG_MCP_SERVERS), checked; none when unset. */
  mcpServers: McpServerConfig[];
  /**
   * Pacing of model calls under the provider's limits (SESSIONLOG_PACING): by the limits the
   * provider states (`auto`), by configured ones, or off.
   */
  pacing: { limits?: PaceLimits } | false;
  /** The budget each tenant's new sessions get when they name none (SESSIONLOG_TENANT_BUDGETS). */
  tenantBudgets: Record<string, Budget>;
  /** Caps on what all of a tenant's sessions spend together (SESSIONLOG_TENANT_CAPS). */
  tenantCaps: Record<string, TenantCaps>;
  /** Model steps of one tenant at once on a worker (SESSIONLOG_TENANT_CONCURRENCY). */
  tenantConcurrency: number | undefined;
  /** The token budget that triggers pressure handling (unset: the model's window). */
  contextBudget: number | undefined;
  /**
   * Which media a request carries (context/media-policy.ts): those of the last `recentTurns` user
   * turns (SESSIONLOG_MEDIA_RECENT_TURNS), and for a model that cannot take one, a refusal or a
   * stand-in (SESSIONLOG_MEDIA_UNSUPPORTED).
   */
  media: {
    recentTurns: number;
    unsupported: 'refuse' | 'stand-in';
    /** The largest image or file in a message or an upload, in bytes (SESSIONLOG_MAX_MEDIA_BYTES). */
    maxBytes: number;
    /** Whether an http(s) image URL is fetched once and stored (SESSIONLOG_FETCH_IMAGE_URLS); default kept as a URL. */
    fetchImageUrls: boolean;
  };
  /**
   * The operations listener of `sessionlog worker` (`/healthz`, `/readyz`, `/metrics`): off when `port` is
   * undefined, 0 picks a free port.
   */
  ops: { host: string; port: number | undefined };
  /** How long a worker asked to stop lets running activities finish before it hands them back. */
  shutdownGraceMs: number;
  /** Port `sessionlog dev` starts the Temporal dev server on (0: a free one); a taken one falls back to a free one. */
  devTemporalPort: number;
  /** Operations telemetry: log level, and tracing (on when an OTLP endpoint is set). */
  telemetry: {
    logLevel: LogLevel;
    /** OTLP/HTTP endpoint of a trace collector; spans go to `<endpoint>/v1/traces`. */
    otlpEndpoint: string | undefined;
    /** Record prompt and reply text in spans (off unless asked for). */
    captureContent: boolean;
  };
};

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const DEEPSEEK_BASE_URL = 'https://api.deepseek.com';

const int = (name: string, min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .regex(/^\d+$/, `${name} must be a whole number`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `${name} must be between ${min} and ${max}`);

/** A setting's JSON value; ConfigError `unreadable` (what to write) when it is not JSON. */
function jsonSetting(text: string, unreadable: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ConfigError(unreadable);
  }
}

/** SESSIONLOG_PACING: `auto`, `off`, or the limits as JSON (`{"requestsPerMinute", "tokensPerMinute", "burstMs"}`). */
function parsePacing(text: string): { limits?: PaceLimits } | false {
  if (text === 'off') return false;
  if (text === 'auto') return {};
  const limits = jsonSetting(
    text,
    'SESSIONLOG_PACING must be auto, off, or JSON limits such as {"requestsPerMinute": 500, "tokensPerMinute": 200000}',
  );
  const problem = paceLimitsProblem(limits);
  if (problem) throw new ConfigError(`SESSIONLOG_PACING: ${problem}`);
  return { limits: limits as PaceLimits };
}

/**
 * A setting keyed by tenant (`{"<tenant>": <value>}`), each key a tenant name and each value
 * checked by `problemOf`: SESSIONLOG_TENANT_BUDGETS (a session budget, session/budget.ts) and
 * SESSIONLOG_TENANT_CAPS (a tenant's caps, `TenantCaps`).
 */
function parseTenantTable<T>(
  name: string,
  text: string,
  example: string,
  problemOf: (value: unknown) => string | undefined,
): Record<string, T> {
  const value = jsonSetting(text, `${name} must be JSON: ${example}`);
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ConfigError(`${name} must be a JSON object keyed by tenant`);
  for (const [tenant, entry] of Object.entries(value)) {
    if (!isValidTenant(tenant)) throw new ConfigError(`${name}: ${JSON.stringify(tenant)} is not a tenant name`);
    const problem = problemOf(entry);
    if (problem) throw new ConfigError(`${name}.${tenant}: ${problem}`);
  }
  return value as Record<string, T>;
}

/** SESSIONLOG_MCP_SERVERS, checked as a worker checks its `mcpServers` (command on PATH, http(s) URLs, unique names). */
function mcpServersSetting(text: string): McpServerConfig[] {
  try {
    return parseMcpServersJson(text, 'SESSIONLOG_MCP_SERVERS');
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
}

const envSchema = z.object({
  SESSIONLOG_STORE: z.string().min(1).optional(),
  TEMPORAL_ADDRESS: z
    .string()
    .regex(/^[^\s:]+:\d+$/, 'TEMPORAL_ADDRESS must look like host:port, e.g. 127.0.0.1:7233')
    .optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).optional(),
  SESSIONLOG_TASK_QUEUE: z.string().min(1).optional(),
  SESSIONLOG_MODEL: z.string().min(1).optional(),
  SESSIONLOG_SYSTEM_PROMPT: z.string().optional(),
  SESSIONLOG_THINKING: z.enum(['enabled', 'disabled']).optional(),
  SESSIONLOG_REASONING_EFFORT: z.string().min(1).optional(),
  SESSIONLOG_MAX_TOKENS: int('SESSIONLOG_MAX_TOKENS', 1).optional(),
  SESSIONLOG_MODEL_TIMEOUT_MS: int('SESSIONLOG_MODEL_TIMEOUT_MS', 1000).optional(),
  OPENAI_BASE_URL: z.string().url('OPENAI_BASE_URL must be a URL such as https://api.deepseek.com').optional(),
  OPENAI_API_KEY: z.string().min(1).optional(),
  DEEPSEEK_API_KEY: z.string().min(1).optional(),
  SESSIONLOG_GATEWAY_TOKENS: z.string().min(1).optional(),
  SESSIONLOG_GATEWAY_TOKEN: z.string().min(16, 'SESSIONLOG_GATEWAY_TOKEN must be at least 16 characters').optional(),
  SESSIONLOG_WEBHOOK_SECRET: z.string().min(16, 'SESSIONLOG_WEBHOOK_SECRET must be at least 16 characters').optional(),
  SESSIONLOG_HOST: z.string().min(1).optional(),
  SESSIONLOG_PORT: int('SESSIONLOG_PORT', 0, 65535).optional(),
  SESSIONLOG_BODY_LIMIT_BYTES: int('SESSIONLOG_BODY_LIMIT_BYTES', 1024).optional(),
  SESSIONLOG_CONNECTION_TIMEOUT_MS: int('SESSIONLOG_CONNECTION_TIMEOUT_MS', 100).optional(),
  SESSIONLOG_HEADERS_TIMEOUT_MS: int('SESSIONLOG_HEADERS_TIMEOUT_MS', 100).optional(),
  SESSIONLOG_BODY_TIMEOUT_MS: int('SESSIONLOG_BODY_TIMEOUT_MS', 100).optional(),
  SESSIONLOG_REQUEST_TIMEOUT_MS: int('SESSIONLOG_REQUEST_TIMEOUT_MS', 100).optional(),
  SESSIONLOG_MAX_CONNECTIONS_PER_ADDRESS: int('SESSIONLOG_MAX_CONNECTIONS_PER_ADDRESS', 1).optional(),
  SESSIONLOG_MAX_WAITING_CONNECTIONS: int('SESSIONLOG_MAX_WAITING_CONNECTIONS', 1).optional(),
  SESSIONLOG_MAX_STEPS: int('SESSIONLOG_MAX_STEPS', 1, 100).optional(),
  SESSIONLOG_MAX_MESSAGE_BYTES: int('SESSIONLOG_MAX_MESSAGE_BYTES', 1, MAX_MESSAGE_BYTES_LIMIT).optional(),
  SESSIONLOG_SPILL_BYTES: int('SESSIONLOG_SPILL_BYTES', 256).optional(),
  SESSIONLOG_CHUNK_FLUSH_MS: int('SESSIONLOG_CHUNK_FLUSH_MS', 1, 10_000).optional(),
  SESSIONLOG_CONTINUE_AS_NEW_TURNS: int('SESSIONLOG_CONTINUE_AS_NEW_TURNS', 1).optional(),
  SESSIONLOG_MODELS: z.string().min(1).optional(),
  SESSIONLOG_UNKNOWN_MODELS: z.enum(['default', 'refuse']).optional(),
  SESSIONLOG_APPROVAL: z
    .string()
    .regex(
      /^(never|always|tools:[A-Za-z0-9_-]+(,[A-Za-z0-9_-]+)*)$/,
      'SESSIONLOG_APPROVAL must be never, always or tools:NAME[,NAME…]',
    )
    .optional(),
  SESSIONLOG_APPROVAL_TIMEOUT_MS: int('SESSIONLOG_APPROVAL_TIMEOUT_MS', 1000).optional(),
  SESSIONLOG_MCP_SERVERS: z.string().min(1).optional(),
  SESSIONLOG_CONTEXT_BUDGET: int('SESSIONLOG_CONTEXT_BUDGET', 1).optional(),
  SESSIONLOG_MEDIA_RECENT_TURNS: int('SESSIONLOG_MEDIA_RECENT_TURNS', 0, 1000).optional(),
  SESSIONLOG_MEDIA_UNSUPPORTED: z.enum(['refuse', 'stand-in']).optional(),
  SESSIONLOG_MAX_MEDIA_BYTES: int('SESSIONLOG_MAX_MEDIA_BYTES', 1, MAX_MEDIA_BYTES_LIMIT).optional(),
  SESSIONLOG_FETCH_IMAGE_URLS: z
    .enum(['true', 'false'], { message: 'SESSIONLOG_FETCH_IMAGE_URLS must be true or false' })
    .optional(),
  SESSIONLOG_PACING: z.string().min(1).optional(),
  SESSIONLOG_TENANT_BUDGETS: z.string().min(1).optional(),
  SESSIONLOG_TENANT_CAPS: z.string().min(1).optional(),
  SESSIONLOG_TENANT_CONCURRENCY: int('SESSIONLOG_TENANT_CONCURRENCY', 1, 10_000).optional(),
  SESSIONLOG_BUDGET_WAIT_MS: int('SESSIONLOG_BUDGET_WAIT_MS', 0, MAX_BUDGET_WAIT_MS).optional(),
  SESSIONLOG_RATE_LIMIT_PAUSE_MS: int('SESSIONLOG_RATE_LIMIT_PAUSE_MS', 0, 24 * 60 * 60_000).optional(),
  SESSIONLOG_MODEL_HEARTBEAT_MS: int('SESSIONLOG_MODEL_HEARTBEAT_MS', 500).optional(),
  SESSIONLOG_MODEL_MAX_ATTEMPTS: int('SESSIONLOG_MODEL_MAX_ATTEMPTS', 1, 1000).optional(),
  SESSIONLOG_METRICS_HOST: z.string().min(1).optional(),
  SESSIONLOG_METRICS_PORT: int('SESSIONLOG_METRICS_PORT', 0, 65535).optional(),
  SESSIONLOG_SHUTDOWN_GRACE_MS: int('SESSIONLOG_SHUTDOWN_GRACE_MS', 0, 3_600_000).optional(),
  TEMPORAL_DEV_PORT: int('TEMPORAL_DEV_PORT', 0, 65535).optional(),
  SESSIONLOG_LOG_LEVEL: z
    .enum(LOG_LEVELS, { message: `SESSIONLOG_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}` })
    .optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: z
    .string()
    .url('OTEL_EXPORTER_OTLP_ENDPOINT must be a URL such as http://127.0.0.1:4318 (OTLP over HTTP)')
    .optional(),
  SESSIONLOG_TRACE_CONTENT: z
    .enum(['true', 'false'], { message: 'SESSIONLOG_TRACE_CONTENT must be true or false' })
    .optional(),
});

/** One environment variable as people read it: docs/configuration.md is generated from {@link CONFIG_VARIABLES}. */
export type ConfigVariable = {
  /** The section of the configuration reference it is listed in. */
  group: string;
  /** The value when unset, in words where it depends on other settings. */
  default: string;
  /** What it changes. */
  meaning: string;
  /** The smallest and largest value a whole-number setting takes (the schema's bounds; test/docs holds them equal). */
  min?: number;
  max?: number;
};

/**
 * Every environment variable the configuration reads (the keys of the schema above: a variable
 * added there without a row here does not compile), with its default, meaning and bounds. The
 * configuration reference (docs/configuration.md) is generated from this table.
 */
export const CONFIG_VARIABLES = {
  SESSIONLOG_STORE: {
    group: 'Store and Temporal',
    default: '`sqlite:./.sessionlog/sessionlog.db`',
    meaning:
      '`sqlite:PATH`, `jsonl:DIR`, or `postgres://user@host/db?schema=NAME` for fleets of workers on many hosts (LISTEN/NOTIFY drives live tails)',
  },
  TEMPORAL_ADDRESS: {
    group: 'Store and Temporal',
    default: 'unset: `dev` starts its own server; other commands use a running `dev`',
    meaning: 'Temporal frontend `host:port`',
  },
  TEMPORAL_DEV_PORT: {
    group: 'Store and Temporal',
    default: '`7233`',
    meaning: 'port `dev` starts its Temporal dev server on (`0`: a free one; a taken one falls back to a free one)',
    min: 0,
    max: 65535,
  },
  TEMPORAL_NAMESPACE: { group: 'Store and Temporal', default: '`default`', meaning: 'Temporal namespace' },
  SESSIONLOG_TASK_QUEUE: {
    group: 'Store and Temporal',
    default: '`sessionlog`',
    meaning: 'task queue of the session workflows',
  },
  SESSIONLOG_MODEL: {
    group: 'Model',
    default: '`deepseek-flash` (`fake` offline)',
    meaning:
      'model from the catalogue (`deepseek-flash`, `deepseek-v4-pro`, `gpt-4o`, `gpt-4.1`, …; `deepseek-chat`/`deepseek-reasoner` are aliases)',
  },
  DEEPSEEK_API_KEY: { group: 'Model', default: 'unset: offline model', meaning: 'DeepSeek API key' },
  OPENAI_API_KEY: {
    group: 'Model',
    default: 'unset: offline model',
    meaning: 'provider key of the endpoint `OPENAI_BASE_URL` names (wins over `DEEPSEEK_API_KEY`)',
  },
  OPENAI_BASE_URL: {
    group: 'Model',
    default: '`https://api.deepseek.com` when a key is set',
    meaning: 'any OpenAI-compatible endpoint',
  },
  SESSIONLOG_SYSTEM_PROMPT: { group: 'Model', default: 'none', meaning: 'system prompt of new sessions' },
  SESSIONLOG_THINKING: {
    group: 'Model',
    default: 'provider default',
    meaning: '`enabled` / `disabled` (DeepSeek thinking mode)',
  },
  SESSIONLOG_REASONING_EFFORT: {
    group: 'Model',
    default: 'provider default',
    meaning: 'reasoning effort sent to the model',
  },
  SESSIONLOG_MAX_TOKENS: {
    group: 'Model',
    default: 'provider default',
    meaning: 'output tokens per model request',
    min: 1,
  },
  SESSIONLOG_MODEL_TIMEOUT_MS: { group: 'Model', default: '`600000`', meaning: 'per model request', min: 1000 },
  SESSIONLOG_MODELS: {
    group: 'Model',
    default: 'unset',
    meaning:
      'a JSON model catalogue file merged over the built-in one (`{models: {name: {contextWindow, maxOutput, tokenizer, provider, thinkingParam, reasoningContent, prices?}}, aliases: {name: {model}}}`); checked at start',
  },
  SESSIONLOG_UNKNOWN_MODELS: {
    group: 'Model',
    default: '`default`',
    meaning:
      'a model name an OpenAI-compatible request uses that the workers cannot run: `default` runs the default model (the answer reports it), `refuse` answers 404 `model_not_found`',
  },
  SESSIONLOG_PACING: {
    group: 'Model',
    default: '`auto`',
    meaning:
      'pacing of model calls under the provider\'s limits, through one bucket per provider account shared by every worker of the store: `auto` (by the limits the provider states in its `x-ratelimit-limit-requests`/`-tokens` headers; a provider that states none is not paced), `off`, or the limits as JSON `{"requestsPerMinute": 500, "tokensPerMinute": 200000, "burstMs": 500}`',
  },
  SESSIONLOG_RATE_LIMIT_PAUSE_MS: {
    group: 'Model',
    default: '`60000`',
    meaning:
      'a provider retry-after at least this long pauses the turn on a workflow timer (`paused: rate_limit`) instead of retrying the activity; `0`: never',
    min: 0,
    max: 24 * 60 * 60_000,
  },
  SESSIONLOG_GATEWAY_TOKEN: {
    group: 'Gateway',
    default: 'unset',
    meaning:
      'bearer token (or `x-api-key`, as the LangGraph SDK sends it), at least 16 characters; **required** when the gateway listens beyond loopback, and enforced whenever set',
  },
  SESSIONLOG_GATEWAY_TOKENS: {
    group: 'Gateway',
    default: 'unset',
    meaning:
      'tokens scoped to a tenant and rights, as JSON `{"<token>": {"tenant": "acme", "rights": ["read", "write", "approve", "admin"]}}` (rights default to all; tokens at least 16 characters)',
  },
  SESSIONLOG_WEBHOOK_SECRET: {
    group: 'Gateway',
    default: 'unset',
    meaning:
      "signs the LangGraph API's run webhooks (at least 16 characters); without it a run asking for a webhook is refused",
  },
  SESSIONLOG_HOST: { group: 'Gateway', default: '`127.0.0.1`', meaning: 'gateway listen address' },
  SESSIONLOG_PORT: { group: 'Gateway', default: '`8787`', meaning: 'gateway listen port', min: 0, max: 65535 },
  SESSIONLOG_BODY_LIMIT_BYTES: {
    group: 'Gateway',
    default: 'twice the message limit or 4/3 of the media limit (base64), whichever is larger, + 1 MiB (`29010603`)',
    meaning: 'largest HTTP request body',
    min: 1024,
  },
  SESSIONLOG_HEADERS_TIMEOUT_MS: {
    group: 'Gateway',
    default: '`10000`',
    meaning: 'the request line and headers must arrive within this, else 408',
    min: 100,
  },
  SESSIONLOG_BODY_TIMEOUT_MS: {
    group: 'Gateway',
    default: '`30000`',
    meaning: 'once the headers are in, the whole body must arrive within this, else 408',
    min: 100,
  },
  SESSIONLOG_REQUEST_TIMEOUT_MS: {
    group: 'Gateway',
    default: '`60000`',
    meaning: 'headers and body together must arrive within this, else 408 (at least the headers timeout)',
    min: 100,
  },
  SESSIONLOG_CONNECTION_TIMEOUT_MS: {
    group: 'Gateway',
    default: '`60000`',
    meaning: "a socket idle this long before its first request's headers are in is closed",
    min: 100,
  },
  SESSIONLOG_MAX_CONNECTIONS_PER_ADDRESS: {
    group: 'Gateway',
    default: '`256`',
    meaning:
      'open connections one client address may hold (gateway and operations listener); more are answered 429 and closed',
    min: 1,
  },
  SESSIONLOG_MAX_WAITING_CONNECTIONS: {
    group: 'Gateway',
    default: '`1024`',
    meaning: 'connections waiting on their clients; past it the longest-waiting one is closed with 408',
    min: 1,
  },
  SESSIONLOG_MAX_MESSAGE_BYTES: {
    group: 'Sessions',
    default: '`8388608` (8 MiB)',
    meaning:
      'largest user message or external tool output (refused with 422 / `MESSAGE_TOO_LARGE`); it waits in the inbox, not in Temporal',
    min: 1,
    max: MAX_MESSAGE_BYTES_LIMIT,
  },
  SESSIONLOG_MAX_STEPS: {
    group: 'Sessions',
    default: '`8`',
    meaning: 'model steps (tool rounds + 1) per turn',
    min: 1,
    max: 100,
  },
  SESSIONLOG_SPILL_BYTES: {
    group: 'Sessions',
    default: '`16384`',
    meaning: 'tool output above this is logged as a head/tail preview + locator',
    min: 256,
  },
  SESSIONLOG_CHUNK_FLUSH_MS: {
    group: 'Sessions',
    default: '`100`',
    meaning: 'streamed tokens are appended to the log in batches this often (each batch is one durable commit)',
    min: 1,
    max: 10_000,
  },
  SESSIONLOG_CONTINUE_AS_NEW_TURNS: {
    group: 'Sessions',
    default: '`500`',
    meaning:
      "continue-as-new after this many turns even if Temporal does not suggest it. Also bounds a worker's memory: Temporal's core keeps a cached run's state and payloads until the run ends, ~12 KB a turn (BENCHMARKS.md, issue 53)",
    min: 1,
  },
  SESSIONLOG_MODEL_HEARTBEAT_MS: {
    group: 'Sessions',
    default: '`30000`',
    meaning:
      'a model call whose worker stops heartbeating for this long is retried on another worker (a tunable of the sessions a client or gateway starts)',
    min: 500,
  },
  SESSIONLOG_MODEL_MAX_ATTEMPTS: {
    group: 'Sessions',
    default: '`6`',
    meaning: 'attempts of a retryable model failure per step, worker crashes included (a tunable, as above)',
    min: 1,
    max: 1000,
  },
  SESSIONLOG_CONTEXT_BUDGET: {
    group: 'Sessions',
    default: "the model's window",
    meaning: 'tokens a request may reach before pressure handling (prune, compact) starts',
    min: 1,
  },
  SESSIONLOG_MEDIA_RECENT_TURNS: {
    group: 'Sessions',
    default: '`3`',
    meaning:
      'a request carries the images and files of this many most recent user turns (and of the current tool round); older ones become a text stand-in naming the artifact, which the agent can open again with the `open_media` tool',
    min: 0,
    max: 1000,
  },
  SESSIONLOG_MAX_MEDIA_BYTES: {
    group: 'Sessions',
    default: '`20971520` (20 MiB)',
    meaning:
      'largest image or file in a message or an upload (refused with 413 / `MEDIA_TOO_LARGE`, naming the part); media are stored once per session in the artifact store, never in Temporal',
    min: 1,
    max: MAX_MEDIA_BYTES_LIMIT,
  },
  SESSIONLOG_FETCH_IMAGE_URLS: {
    group: 'Sessions',
    default: '`false`',
    meaning:
      '`true`: an http(s) image URL in a message is fetched once and stored like uploaded bytes (hosts resolving to private, loopback or link-local addresses are refused, redirects are not followed); `false`: it is kept as a URL the provider is given, never fetched',
  },
  SESSIONLOG_MEDIA_UNSUPPORTED: {
    group: 'Sessions',
    default: '`refuse`',
    meaning:
      "a message with an image or file the model cannot take (the model catalogue's `input`): `refuse` answers 400 `MEDIA_NOT_SUPPORTED` naming the part, `stand-in` sends a text stand-in instead",
  },
  SESSIONLOG_MCP_SERVERS: {
    group: 'Sessions',
    default: 'none',
    meaning:
      'MCP servers whose tools the worker offers to every session, as `<server>__<tool>`: a JSON array of `{"name", "command", "args"?, "env"?, "cwd"?}` (stdio) or `{"name", "url", "headers"?}` (Streamable HTTP), each with `"timeoutMs"`? (default `60000`), `"approval"`? (`destructive`, the default, `always` or `never`) and `"maxMediaBytes"`? (default `SESSIONLOG_MAX_MEDIA_BYTES`); see [MCP servers as tool sources](typescript-api.md#mcp-servers-as-tool-sources)',
  },
  SESSIONLOG_APPROVAL: {
    group: 'Approvals, budgets and tenants',
    default: '`never`',
    meaning:
      "which tool calls wait for a person's approval when the tool does not say: `never`, `always` or `tools:NAME[,NAME…]`",
  },
  SESSIONLOG_APPROVAL_TIMEOUT_MS: {
    group: 'Approvals, budgets and tenants',
    default: '`86400000` (a day)',
    meaning: 'a call unanswered this long is denied with the reason `expired`',
    min: 1000,
  },
  SESSIONLOG_BUDGET_WAIT_MS: {
    group: 'Approvals, budgets and tenants',
    default: '`86400000` (a day)',
    meaning:
      "how long a turn paused on a spend cap waits for the budget to be raised before it ends with `budget_exceeded` (a budget's own `waitMs` wins)",
    min: 0,
    max: MAX_BUDGET_WAIT_MS,
  },
  SESSIONLOG_TENANT_CONCURRENCY: {
    group: 'Approvals, budgets and tenants',
    default: '`16`',
    meaning: 'model steps and compactions of one tenant at once on a worker',
    min: 1,
    max: 10_000,
  },
  SESSIONLOG_TENANT_BUDGETS: {
    group: 'Approvals, budgets and tenants',
    default: 'unset',
    meaning: 'the budget each tenant\'s new sessions get when their create names none, `{"<tenant>": <budget>}`',
  },
  SESSIONLOG_TENANT_CAPS: {
    group: 'Approvals, budgets and tenants',
    default: 'unset',
    meaning:
      'caps on what all of a tenant\'s sessions spend together, `{"<tenant>": {"costUsd": 500, "tokens": 50000000, "modelCalls": 100000, "toolCalls": 100000, "wallMs": 360000000, "waitMs": 3600000}}` (any subset)',
  },
  SESSIONLOG_METRICS_PORT: {
    group: 'Operations',
    default: 'off',
    meaning: "`sessionlog worker`'s operations listener (`/healthz`, `/readyz`, `/metrics`); `0` picks a free port",
    min: 0,
    max: 65535,
  },
  SESSIONLOG_METRICS_HOST: {
    group: 'Operations',
    default: '`127.0.0.1`',
    meaning: "address of the worker's operations listener",
  },
  SESSIONLOG_SHUTDOWN_GRACE_MS: {
    group: 'Operations',
    default: '`10000`',
    meaning:
      'a worker told to stop (SIGTERM) lets running activities finish this long, then hands them back to Temporal',
    min: 0,
    max: 3_600_000,
  },
  SESSIONLOG_LOG_LEVEL: {
    group: 'Operations',
    default: '`info`',
    meaning: '`trace`, `debug`, `info`, `warn`, `error`, `fatal` or `silent` (JSON lines; readable in `dev`)',
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    group: 'Operations',
    default: 'unset (no tracing)',
    meaning: 'OTLP/HTTP trace collector, e.g. `http://127.0.0.1:4318`',
  },
  SESSIONLOG_TRACE_CONTENT: {
    group: 'Operations',
    default: '`false`',
    meaning: '`true` records prompt and reply text in model spans',
  },
} as const satisfies Record<keyof z.input<typeof envSchema>, ConfigVariable>;

/** Resolves configuration from `env` (default `process.env`) plus explicit overrides (CLI flags). */
export function resolveConfig(
  env: Record<string, string | undefined> = process.env,
  overrides: Partial<Record<keyof z.input<typeof envSchema>, string>> = {},
): Config {
  const merged: Record<string, string> = {};
  for (const key of Object.keys(envSchema.shape)) {
    const value = overrides[key as keyof typeof overrides] ?? env[key];
    if (value !== undefined && value !== '') merged[key] = value;
  }
  const parsed = envSchema.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0] ?? 'configuration');
    throw new ConfigError(`${name}: ${issue.message}`);
  }
  const e = parsed.data;
  const apiKey = e.OPENAI_API_KEY ?? e.DEEPSEEK_API_KEY;
  const offline = apiKey === undefined && e.OPENAI_BASE_URL === undefined;
  const baseURL = offline ? undefined : (e.OPENAI_BASE_URL ?? DEEPSEEK_BASE_URL);
  const modelName = e.SESSIONLOG_MODEL ?? (offline ? 'fake' : 'deepseek-flash');
  const provider = offline ? 'fake' : baseURL?.includes('deepseek') ? 'deepseek' : 'openai';
  // Configured secrets never leave the process in a log, an error or an export.
  registerSecret(apiKey);
  registerSecret(e.SESSIONLOG_GATEWAY_TOKEN);
  const tokens = e.SESSIONLOG_GATEWAY_TOKENS === undefined ? [] : parseTokenGrants(e.SESSIONLOG_GATEWAY_TOKENS);
  for (const grant of tokens) registerSecret(grant.token);
  registerSecret(e.SESSIONLOG_WEBHOOK_SECRET);
  const catalogue = e.SESSIONLOG_MODELS === undefined ? DEFAULT_MODEL_CATALOGUE : loadCatalogue(e.SESSIONLOG_MODELS);
  try {
    lookupModel(catalogue, modelName);
  } catch (error) {
    if (error instanceof ModelCatalogueError) throw new ConfigError(`SESSIONLOG_MODEL: ${error.message}`);
    throw error;
  }
  const timeouts = resolveGatewayTimeouts({
    ...(e.SESSIONLOG_CONNECTION_TIMEOUT_MS !== undefined
      ? { connectionTimeoutMs: e.SESSIONLOG_CONNECTION_TIMEOUT_MS }
      : {}),
    ...(e.SESSIONLOG_HEADERS_TIMEOUT_MS !== undefined ? { headersTimeoutMs: e.SESSIONLOG_HEADERS_TIMEOUT_MS } : {}),
    ...(e.SESSIONLOG_BODY_TIMEOUT_MS !== undefined ? { bodyTimeoutMs: e.SESSIONLOG_BODY_TIMEOUT_MS } : {}),
    ...(e.SESSIONLOG_REQUEST_TIMEOUT_MS !== undefined ? { requestTimeoutMs: e.SESSIONLOG_REQUEST_TIMEOUT_MS } : {}),
  });
  return {
    store: e.SESSIONLOG_STORE ?? 'sqlite:./.sessionlog/sessionlog.db',
    temporalAddress: e.TEMPORAL_ADDRESS,
    namespace: e.TEMPORAL_NAMESPACE ?? 'default',
    taskQueue: e.SESSIONLOG_TASK_QUEUE ?? DEFAULT_TASK_QUEUE,
    model: {
      name: modelName,
      baseURL,
      apiKey,
      provider,
      offline,
      system: e.SESSIONLOG_SYSTEM_PROMPT,
      thinking: e.SESSIONLOG_THINKING === undefined ? undefined : e.SESSIONLOG_THINKING === 'enabled',
      reasoningEffort: e.SESSIONLOG_REASONING_EFFORT,
      maxTokens: e.SESSIONLOG_MAX_TOKENS,
      timeoutMs: e.SESSIONLOG_MODEL_TIMEOUT_MS ?? 600_000,
    },
    gateway: {
      host: e.SESSIONLOG_HOST ?? '127.0.0.1',
      port: e.SESSIONLOG_PORT ?? 8787,
      token: e.SESSIONLOG_GATEWAY_TOKEN,
      tokens,
      webhookSecret: e.SESSIONLOG_WEBHOOK_SECRET,
      // A JSON body escapes some characters of the message it carries (a newline is two bytes), and
      // carries a medium as base64 (4 bytes for 3).
      bodyLimitBytes:
        e.SESSIONLOG_BODY_LIMIT_BYTES ??
        Math.max(
          2 * (e.SESSIONLOG_MAX_MESSAGE_BYTES ?? DEFAULT_TUNABLES.maxMessageBytes),
          Math.ceil(((e.SESSIONLOG_MAX_MEDIA_BYTES ?? DEFAULT_MAX_MEDIA_BYTES) * 4) / 3),
        ) +
          1024 * 1024,
      ...timeouts,
    },
    listenerLimits: resolveListenerLimits({
      ...(e.SESSIONLOG_MAX_CONNECTIONS_PER_ADDRESS !== undefined
        ? { maxConnectionsPerAddress: e.SESSIONLOG_MAX_CONNECTIONS_PER_ADDRESS }
        : {}),
      ...(e.SESSIONLOG_MAX_WAITING_CONNECTIONS !== undefined
        ? { maxWaitingConnections: e.SESSIONLOG_MAX_WAITING_CONNECTIONS }
        : {}),
    }),
    tunables: {
      ...DEFAULT_TUNABLES,
      ...(e.SESSIONLOG_MAX_STEPS !== undefined ? { maxStepsPerTurn: e.SESSIONLOG_MAX_STEPS } : {}),
      ...(e.SESSIONLOG_MAX_MESSAGE_BYTES !== undefined ? { maxMessageBytes: e.SESSIONLOG_MAX_MESSAGE_BYTES } : {}),
      ...(e.SESSIONLOG_CONTINUE_AS_NEW_TURNS !== undefined
        ? { continueAsNewAfterTurns: e.SESSIONLOG_CONTINUE_AS_NEW_TURNS }
        : {}),
      ...(e.SESSIONLOG_APPROVAL_TIMEOUT_MS !== undefined
        ? { approvalTimeoutMs: e.SESSIONLOG_APPROVAL_TIMEOUT_MS }
        : {}),
      ...(e.SESSIONLOG_BUDGET_WAIT_MS !== undefined ? { budgetWaitMs: e.SESSIONLOG_BUDGET_WAIT_MS } : {}),
      ...(e.SESSIONLOG_RATE_LIMIT_PAUSE_MS !== undefined ? { rateLimitPauseMs: e.SESSIONLOG_RATE_LIMIT_PAUSE_MS } : {}),
      ...(e.SESSIONLOG_MODEL_HEARTBEAT_MS !== undefined ? { modelHeartbeatMs: e.SESSIONLOG_MODEL_HEARTBEAT_MS } : {}),
      ...(e.SESSIONLOG_MODEL_MAX_ATTEMPTS !== undefined ? { modelMaxAttempts: e.SESSIONLOG_MODEL_MAX_ATTEMPTS } : {}),
    },
    spillMaxInlineBytes: e.SESSIONLOG_SPILL_BYTES ?? 16 * 1024,
    chunkFlushMs: e.SESSIONLOG_CHUNK_FLUSH_MS ?? DEFAULT_COALESCE.maxDelayMs,
    catalogue,
    unknownModels: e.SESSIONLOG_UNKNOWN_MODELS ?? 'default',
    approval: parseApprovalPolicy(e.SESSIONLOG_APPROVAL ?? 'never'),
    mcpServers: e.SESSIONLOG_MCP_SERVERS === undefined ? [] : mcpServersSetting(e.SESSIONLOG_MCP_SERVERS),
    pacing: parsePacing(e.SESSIONLOG_PACING ?? 'auto'),
    tenantBudgets:
      e.SESSIONLOG_TENANT_BUDGETS === undefined
        ? {}
        : parseTenantTable<Budget>(
            'SESSIONLOG_TENANT_BUDGETS',
            e.SESSIONLOG_TENANT_BUDGETS,
            '{"<tenant>": {"total": {"costUsd": 50}}}',
            budgetProblem,
          ),
    tenantCaps:
      e.SESSIONLOG_TENANT_CAPS === undefined
        ? {}
        : parseTenantTable<TenantCaps>(
            'SESSIONLOG_TENANT_CAPS',
            e.SESSIONLOG_TENANT_CAPS,
            '{"<tenant>": {"costUsd": 500}}',
            tenantCapsProblem,
          ),
    tenantConcurrency: e.SESSIONLOG_TENANT_CONCURRENCY,
    contextBudget: e.SESSIONLOG_CONTEXT_BUDGET,
    media: {
      recentTurns: e.SESSIONLOG_MEDIA_RECENT_TURNS ?? 3,
      unsupported: e.SESSIONLOG_MEDIA_UNSUPPORTED ?? 'refuse',
      maxBytes: e.SESSIONLOG_MAX_MEDIA_BYTES ?? DEFAULT_MAX_MEDIA_BYTES,
      fetchImageUrls: e.SESSIONLOG_FETCH_IMAGE_URLS === 'true',
    },
    ops: { host: e.SESSIONLOG_METRICS_HOST ?? '127.0.0.1', port: e.SESSIONLOG_METRICS_PORT },
    shutdownGraceMs: e.SESSIONLOG_SHUTDOWN_GRACE_MS ?? 10_000,
    devTemporalPort: e.TEMPORAL_DEV_PORT ?? 7233,
    telemetry: {
      logLevel: e.SESSIONLOG_LOG_LEVEL ?? 'info',
      otlpEndpoint: e.OTEL_EXPORTER_OTLP_ENDPOINT,
      captureContent: e.SESSIONLOG_TRACE_CONTENT === 'true',
    },
  };
}

const catalogueFileSchema = z
  .object({
    models: z.record(z.string().min(1), z.record(z.string(), z.unknown())).optional(),
    aliases: z
      .record(z.string().min(1), z.object({ model: z.string().min(1), thinking: z.boolean().optional() }).strict())
      .optional(),
  })
  .strict();

/**
 * Reads a model catalogue file (JSON: `{models: {name: {contextWindow, maxOutput, tokenizer,
 * provider, thinkingParam, reasoningContent, prices?}}, aliases: {name: {model}}}`) and merges
 * it over the built-in catalogue. Any problem is a ConfigError naming the file and the fix.
 */
function loadCatalogue(path: string): ModelCatalogue {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError(
      `SESSIONLOG_MODELS: cannot read ${path} as JSON (${(error as Error).message}); point it at a model catalogue file`,
    );
  }
  const parsed = catalogueFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`SESSIONLOG_MODELS: ${path} at ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  try {
    return resolveModelCatalogue(parsed.data as ModelCatalogueOverrides);
  } catch (error) {
    if (error instanceof ModelCatalogueError) throw new ConfigError(`SESSIONLOG_MODELS: ${path}: ${error.message}`);
    throw error;
  }
}
