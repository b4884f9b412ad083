/**
 * The production topology of DESIGN §8.1, defined once: what the fleet test starts natively on
 * one machine and what docker-compose.yml describes as containers. test/fleet/topology.test.ts
 * compares docker-compose.yml with this file, and the fleet test builds every process's command
 * line and environment from it, so the tested and the documented topology cannot drift apart.
 *
 * | role                    | fleet test                                   | docker-compose.yml      |
 * |-------------------------|----------------------------------------------|-------------------------|
 * | Temporal's PostgreSQL   | scripts/postgres-cluster (private cluster)   | `postgresql`            |
 * | Temporal server         | scripts/temporal-server (schema, namespace)  | `temporal` + 2 set-up jobs |
 * | sessionlog's PostgreSQL | a second private cluster (killed with -9)    | `sessionlog-postgresql` |
 * | workers                 | `sessionlog worker` × 3                      | `sessionlog-worker`, 3 replicas |
 * | gateways                | `sessionlog serve` × 2                       | `sessionlog-gateway`, 2 replicas |
 * | model                   | one fake model server, `OPENAI_BASE_URL`     | the provider in `.env` (offline model by default) |
 */

/** The full Temporal server release (the one the CLI v1.5.1 embeds); scripts/temporal-server pins the same. */
export const TEMPORAL_SERVER_VERSION = '1.29.1';

/** Every environment variable a worker is started with, in the test and in Compose. */
export const WORKER_VARIABLES = [
  'SESSIONLOG_STORE',
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'SESSIONLOG_TASK_QUEUE',
  'SESSIONLOG_MODEL',
  'OPENAI_BASE_URL',
  'OPENAI_API_KEY',
  'DEEPSEEK_API_KEY',
  'SESSIONLOG_SYSTEM_PROMPT',
  'SESSIONLOG_METRICS_HOST',
  'SESSIONLOG_METRICS_PORT',
  'SESSIONLOG_SHUTDOWN_GRACE_MS',
] as const;

/** Every environment variable a gateway is started with, in the test and in Compose. */
export const GATEWAY_VARIABLES = [
  'SESSIONLOG_STORE',
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'SESSIONLOG_TASK_QUEUE',
  'SESSIONLOG_GATEWAY_TOKEN',
  'SESSIONLOG_MODEL_HEARTBEAT_MS',
  'SESSIONLOG_MODEL_MAX_ATTEMPTS',
] as const;

export type WorkerVariable = (typeof WORKER_VARIABLES)[number];
export type GatewayVariable = (typeof GATEWAY_VARIABLES)[number];

/** The roles, with their Compose service names and what a fleet member is started as. */
export const FLEET = {
  temporalDatabase: { service: 'postgresql' },
  temporal: {
    service: 'temporal',
    version: TEMPORAL_SERVER_VERSION,
    /** Temporal's SQL plugin for PostgreSQL. */
    plugin: 'postgres12',
    /** One-shot Compose jobs doing what scripts/temporal-server does before and after starting the server. */
    setupJobs: ['temporal-schema', 'temporal-namespace'],
    namespace: 'default',
  },
  storeDatabase: { service: 'sessionlog-postgresql' },
  worker: {
    service: 'sessionlog-worker',
    replicas: 3,
    command: ['worker'],
    variables: WORKER_VARIABLES,
    /** Readiness: GET this path on the port named by this variable (the operations listener). */
    readiness: { path: '/readyz', portVariable: 'SESSIONLOG_METRICS_PORT' },
  },
  gateway: {
    service: 'sessionlog-gateway',
    replicas: 2,
    /** Readiness: GET this path on the gateway's own port (`--port`). */
    readiness: { path: '/readyz' },
  },
  /** In Compose only: not part of what the fleet test exercises. */
  composeOnly: ['temporal-ui'],
} as const;

/** The command line of a gateway listening on `host:port`. */
export function gatewayCommand(host: string, port: number): string[] {
  return ['serve', '--host', host, '--port', String(port)];
}

/** Where a fleet member finds the rest of the fleet. */
export type FleetEndpoints = {
  temporalAddress: string;
  namespace: string;
  taskQueue: string;
  /** sessionlog's store: `postgres://…` (or `sqlite:…` for processes on one host). */
  storeUrl: string;
  /** The OpenAI-compatible endpoint every worker calls; one shared model. */
  modelBaseUrl: string;
  /** Model name from the catalogue. */
  model: string;
};

/** A worker's environment: every name of WORKER_VARIABLES, empty meaning unset. */
export function workerEnvironment(
  endpoints: FleetEndpoints,
  options: { opsPort: number; shutdownGraceMs: number },
): Record<WorkerVariable, string> {
  return {
    SESSIONLOG_STORE: endpoints.storeUrl,
    TEMPORAL_ADDRESS: endpoints.temporalAddress,
    TEMPORAL_NAMESPACE: endpoints.namespace,
    SESSIONLOG_TASK_QUEUE: endpoints.taskQueue,
    SESSIONLOG_MODEL: endpoints.model,
    OPENAI_BASE_URL: endpoints.modelBaseUrl,
    OPENAI_API_KEY: '',
    DEEPSEEK_API_KEY: '',
    SESSIONLOG_SYSTEM_PROMPT: '',
    SESSIONLOG_METRICS_HOST: '127.0.0.1',
    SESSIONLOG_METRICS_PORT: String(options.opsPort),
    SESSIONLOG_SHUTDOWN_GRACE_MS: String(options.shutdownGraceMs),
  };
}

/** A gateway's environment: every name of GATEWAY_VARIABLES. The workflow tunables apply to sessions it starts. */
export function gatewayEnvironment(
  endpoints: FleetEndpoints,
  options: { token: string; modelHeartbeatMs: number; modelMaxAttempts: number },
): Record<GatewayVariable, string> {
  return {
    SESSIONLOG_STORE: endpoints.storeUrl,
    TEMPORAL_ADDRESS: endpoints.temporalAddress,
    TEMPORAL_NAMESPACE: endpoints.namespace,
    SESSIONLOG_TASK_QUEUE: endpoints.taskQueue,
    SESSIONLOG_GATEWAY_TOKEN: options.token,
    SESSIONLOG_MODEL_HEARTBEAT_MS: String(options.modelHeartbeatMs),
    SESSIONLOG_MODEL_MAX_ATTEMPTS: String(options.modelMaxAttempts),
  };
}
