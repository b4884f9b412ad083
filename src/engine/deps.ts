/**
 * What the turn engine runs on: the store, the model port, the tools, the agent defaults and
 * context management. Assembled once per worker (src/worker.ts) or per test.
 */
import type { PacingConfig } from './admission/pacing.js';
import type { TenantGate } from './admission/tenant-gate.js';
import type { ContextDeps } from '../context/deps.js';
import type { MediaPolicy } from '../context/media-policy.js';
import type { TenantCaps } from '../session/index.js';
import type { ModelPort } from '../model/provider.js';
import type { SessionStore } from '../persistence/store.js';
import type { ApprovalPolicy } from '../tools/approval.js';
import type { ToolRegistry } from '../tools/registry.js';
import type { AgentConfig } from './agent.js';
import type { EngineTelemetry } from './telemetry.js';

/** Turns a tool's full output into the text logged inline (spill lives in src/context). */
export type ToolResultShaper = (input: {
  sessionId: string;
  callId: string;
  toolName: string;
  text: string;
  locator: string;
}) => Promise<string>;

export type EngineDeps = {
  store: SessionStore;
  model: ModelPort;
  tools: ToolRegistry;
  agent: AgentConfig;
  /** Which calls wait for a person's approval when the tool itself does not say (DESIGN §5.1). */
  approval: ApprovalPolicy;
  /** Shapes each tool output for the log (default: logged whole). */
  shapeToolResult?: ToolResultShaper;
  /** Token meter, pressure policy and pruner; omit to run without context management. */
  context?: ContextDeps;
  /** Which media a request carries (context/media-policy.ts); default `DEFAULT_MEDIA_POLICY`. Give the meter the same. */
  media?: MediaPolicy;
  /** How often a long operation (a streaming model call, a tool) reports it is alive, ms. */
  heartbeatMs: number;
  now(): number;
  /**
   * Context windows providers stated in overflow refusals, by model, learned by any session of
   * this worker (each session also logs its own as `model/limit`).
   */
  learnedWindows?: Map<string, number>;
  /** Learn context windows from overflow refusals (default true; false only to measure without it). */
  learnLimits?: boolean;
  /** Called once a turn is durably closed, with the log's last seq (e.g. to refresh the projection cache off the critical path). */
  onTurnEnded?(sessionId: string, headSeq: number): void;
  /** Metrics and traces (src/telemetry); omit to run unobserved. */
  telemetry?: EngineTelemetry;
  /** Pace model calls under the provider's limits through the store's shared bucket (engine/admission/pacing.ts); omit to not pace. */
  pacing?: PacingConfig;
  /** Per-tenant concurrency of model steps and compactions on this worker (engine/admission/tenant-gate.ts); omit for none. */
  tenantGate?: TenantGate;
  /** A tenant's caps on what all its sessions spend together (SESSIONLOG_TENANT_CAPS); undefined: none. */
  tenantCaps?: (tenant: string) => TenantCaps | undefined;
};
