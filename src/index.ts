/**
 * The public API of `sessionlog` (DESIGN §8): `import { SessionClient, createWorker } from 'sessionlog'`.
 *
 * - {@link SessionClient}: what a backend service uses to start sessions, send messages, follow
 *   the live log and read history (commands go through Temporal, reads come from the store).
 * - {@link createWorker}: the Temporal worker that runs the session workflows and their activities.
 * - {@link openStore}: a store from a URL (`sqlite:PATH`, `jsonl:DIR`, `postgres://…`), the same one the
 *   workers write to.
 * - {@link startGateway}: the HTTP API (`/v1`) over a client and a store.
 * - {@link resolveConfig}: the environment variables of DESIGN §9 as one validated value.
 * - {@link startTelemetry}: Prometheus metrics, OpenTelemetry tracing and JSON logs for a worker
 *   (`createWorker({ telemetry: t.engine })`) and a gateway (`startGateway({ telemetry: t.gateway })`).
 * - {@link createOpenAIProvider} and {@link startFakeModelServer}: the model port for any
 *   OpenAI-compatible endpoint, and the offline model server used by `sessionlog dev` and tests.
 *
 * A plain re-export list: each module documents its own exports.
 */
export { SessionClient } from './client/session-client.js';
export type {
  PendingApproval,
  Reply,
  SessionClientOptions,
  SessionSummary,
  VerifyReport,
} from './client/session-client.js';
export type { SessionNote } from './client/commands.js';

export { createWorker } from './worker.js';
export type { CreateWorkerOptions } from './worker.js';
export type { AgentConfig, EngineTelemetry, ToolResultShaper } from './engine/index.js';

export { startTelemetry } from './telemetry/index.js';
export type { Telemetry, TelemetryOptions, TelemetrySettings } from './telemetry/index.js';
export { startOpsServer } from './telemetry/ops-server.js';

export { openStore } from './persistence/open.js';
export type { StoreOptions } from './persistence/store.js';
export type {
  AppendOptions,
  AppendResult,
  ErasedPlace,
  LoadedSession,
  ScanProblem,
  ScanReport,
  SessionStore,
  StoreEraseReceipt,
  WatchOptions,
} from './persistence/store.js';

export {
  Session,
  SESSION_ERRORS,
  SESSION_FORMAT_VERSION,
  SessionlogError,
  isEventOfType,
  isSessionlogError,
  textOf,
  inspectMedia,
  DEFAULT_MAX_MEDIA_BYTES,
} from './session/index.js';
export type {
  AgentSpec,
  ContextReport,
  StoredEvent,
  AssistantMessage,
  ContentBlock,
  FileBlock,
  ImageBlock,
  MediaBlock,
  MediaInput,
  MediaType,
  RemoteMedia,
  StoredMedia,
  UserPart,
  EventDataMap,
  KnownEventType,
  Message,
  NewEvent,
  ReasoningBlock,
  SessionErrorClass,
  SessionErrorCode,
  SessionErrorSpec,
  SessionEvent,
  SessionHeader,
  StreamChunk,
  TextBlock,
  TokenUsage,
  ToolCallBlock,
  ToolResultBlock,
  ToolResultMessage,
  TurnEndReason,
  UserMessage,
} from './session/index.js';

export { ToolInputError, ToolRegistry } from './tools/registry.js';
export type { ApprovalRule, ExternalTool, RunnableTool, Tool, ToolContext, ToolOutput } from './tools/registry.js';
export { parseApprovalPolicy } from './tools/approval.js';
export type { ApprovalPolicy } from './tools/approval.js';
export type { McpApproval, McpHttpServerConfig, McpServerConfig, McpStdioServerConfig } from './tools/mcp/index.js';
export { BUILTIN_TOOLS, calculatorTool, openMediaTool, readArtifactTool, wordCountTool } from './tools/builtin.js';
export { defineTool } from './tools/define.js';
export type { SchemaTool, ToolDefinition, ToolResultValue } from './tools/define.js';
export { toSessionlogTool } from './tools/adapter.js';
export type { AISDKTool, LangChainTool, ToolLike } from './tools/adapter.js';
export type { StandardSchemaV1 } from './tools/schema.js';
export type { ToolCollection } from './tools/registry.js';

export { DEFAULT_TASK_QUEUE, DEFAULT_TUNABLES } from './workflows/api.js';
export type {
  ApprovalInput,
  ApprovalResult,
  CompactResult,
  SendResult,
  SessionPhase,
  SessionStatus,
  SessionTunables,
  ToolResultAck,
  TurnOutcome,
} from './workflows/api.js';

export { ConfigError, resolveConfig } from './config.js';
export type { Config, ModelSettings } from './config.js';

export { startGateway } from './gateway/index.js';
export type { GatewayOptions, RunningGateway, StartGatewayOptions } from './gateway/index.js';

export { createOpenAIProvider, startFakeModelServer } from './model/index.js';
export type {
  FakeModelServer,
  FakeModelServerOptions,
  ModelFailure,
  ModelPort,
  ModelReply,
  ModelRequest,
  OpenAIProviderConfig,
} from './model/index.js';
export { ModelCallError, classifyModelError } from './model/index.js';

export { createContextReporter } from './context/report.js';
export { createTokenMeter } from './context/token-meter.js';
export { DEFAULT_MEDIA_POLICY, applyMediaPolicy } from './context/media-policy.js';
export type { MediaPolicy } from './context/media-policy.js';
export { checkMediaSupported } from './model/media-support.js';
