/**
 * docker-compose.yml describes what the fleet test runs (test/fleet/topology.ts): the same
 * roles and replica counts, the same commands, exactly the same environment variable names for
 * workers and gateways, readiness checks on the same endpoints, the store on a PostgreSQL of its
 * own, and the Temporal server release scripts/temporal-server builds. Parsed with the `yaml`
 * package (merge keys resolved), so it runs where Docker is not installed; Compose's own
 * validation is test/deploy/compose.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { FLEET, GATEWAY_VARIABLES, TEMPORAL_SERVER_VERSION, WORKER_VARIABLES, gatewayCommand } from './topology.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

type Service = {
  image?: string;
  command?: string[];
  deploy?: { replicas?: number | string };
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  stop_grace_period?: string;
};

const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  configs: Record<string, { content: string }>;
};
const services = compose.services;

/** Compose's `${VAR:-default}` / `${VAR:?message}` / `${VAR}` substitution with every variable unset (defaults win). */
function withDefaults(value: string): string {
  let out = value;
  // Innermost first, so a default that holds another substitution resolves too.
  for (let guard = 0; guard < 10 && out.includes('${'); guard++) {
    out = out.replace(
      /\$\{([A-Z0-9_]+)(?::?([-?])([^${}]*))?\}/g,
      (_, _name: string, op: string | undefined, rest: string | undefined) => (op === '-' ? (rest ?? '') : ''),
    );
  }
  return out;
}

const service = (name: string): Service => {
  const found = services[name];
  if (!found) throw new Error(`docker-compose.yml has no service ${name}`);
  return found;
};

/** The port a readiness check in a healthcheck command fetches `path` on. */
function readinessPort(check: Service['healthcheck'], path: string): number {
  const command = (check?.test ?? []).join(' ');
  const match = new RegExp(`http://127\\.0\\.0\\.1:(\\d+)${path.replace('/', '\\/')}\\b`).exec(command);
  if (!match) throw new Error(`healthcheck does not fetch ${path}: ${command}`);
  return Number(match[1]);
}

describe('docker-compose.yml matches the fleet topology the fleet test runs', () => {
  it('has exactly the roles of the topology, plus the Compose-only UI', () => {
    const expected = [
      FLEET.temporalDatabase.service,
      FLEET.temporal.service,
      ...FLEET.temporal.setupJobs,
      FLEET.storeDatabase.service,
      FLEET.worker.service,
      FLEET.gateway.service,
      ...FLEET.composeOnly,
    ];
    expect(Object.keys(services).sort()).toEqual([...expected].sort());
  });

  it('runs the Temporal server release scripts/temporal-server builds, on its own PostgreSQL with the postgres12 plugin', () => {
    const script = readFileSync(join(ROOT, 'scripts/temporal-server'), 'utf8');
    expect(/readonly SERVER_VERSION="([^"]+)"/.exec(script)?.[1]).toBe(TEMPORAL_SERVER_VERSION);
    const temporal = service(FLEET.temporal.service);
    expect(temporal.image).toBe(`temporalio/server:${TEMPORAL_SERVER_VERSION}`);
    expect(temporal.environment?.DB).toBe(FLEET.temporal.plugin);
    expect(temporal.environment?.POSTGRES_SEEDS).toBe(FLEET.temporalDatabase.service);
    expect(service(FLEET.temporal.setupJobs[0]).image).toContain(TEMPORAL_SERVER_VERSION);
    expect(withDefaults(service('temporal-namespace').environment!.NAMESPACE!)).toBe(FLEET.temporal.namespace);
  });

  it("gives Compose's Temporal server the dynamic config scripts/temporal-server writes for the fleet test", () => {
    // The keys the script writes (each an `echo "KEY:"` then `echo "  - value: V"`), beside Compose's config.
    const script = readFileSync(join(ROOT, 'scripts/temporal-server'), 'utf8');
    const written = Object.fromEntries(
      [...script.matchAll(/echo "([a-zA-Z.]+):"\n\s*echo " {2}- value: (\w+)"/g)].map((m) => [m[1], m[2] === 'true']),
    );
    const content = compose.configs['temporal-dynamic-config']!.content;
    const composed = Object.fromEntries(
      Object.entries(parse(content) as Record<string, Array<{ value: unknown }>>).map(([key, [first]]) => [
        key,
        first!.value,
      ]),
    );
    expect(written).toMatchObject({
      'frontend.enableUpdateWorkflowExecution': true,
      'frontend.enableUpdateWorkflowExecutionAsyncAccepted': true,
      'system.enableActivityEagerExecution': true,
    });
    expect(composed).toMatchObject(written);
  });

  it('starts the workers as the test does: command, replicas, exactly its environment variables, readiness on the operations port', () => {
    const worker = service(FLEET.worker.service);
    expect(worker.command).toEqual([...FLEET.worker.command]);
    expect(Number(withDefaults(String(worker.deploy?.replicas)))).toBe(FLEET.worker.replicas);
    expect(Object.keys(worker.environment ?? {}).sort()).toEqual([...WORKER_VARIABLES].sort());
    const opsPort = Number(withDefaults(worker.environment![FLEET.worker.readiness.portVariable]!));
    expect(readinessPort(worker.healthcheck, FLEET.worker.readiness.path)).toBe(opsPort);
    // A drain (SIGTERM, then the grace period) ends before Compose would SIGKILL.
    const graceSeconds = Number(withDefaults(worker.environment!.SESSIONLOG_SHUTDOWN_GRACE_MS!)) / 1000;
    expect(Number.parseInt(worker.stop_grace_period ?? '10', 10)).toBeGreaterThan(graceSeconds);
  });

  it('starts the gateways as the test does: serve --host --port, replicas, exactly its environment variables, readiness on that port', () => {
    const gateway = service(FLEET.gateway.service);
    const command = gateway.command ?? [];
    expect(command).toEqual(gatewayCommand(command[2]!, Number(command[4])));
    expect(Number(withDefaults(String(gateway.deploy?.replicas)))).toBe(FLEET.gateway.replicas);
    expect(Object.keys(gateway.environment ?? {}).sort()).toEqual([...GATEWAY_VARIABLES].sort());
    expect(readinessPort(gateway.healthcheck, FLEET.gateway.readiness.path)).toBe(Number(command[4]));
  });

  it("points workers and gateways at one store on the store PostgreSQL (not Temporal's) and at the same Temporal", () => {
    const worker = service(FLEET.worker.service).environment!;
    const gateway = service(FLEET.gateway.service).environment!;
    for (const name of ['SESSIONLOG_STORE', 'TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE', 'SESSIONLOG_TASK_QUEUE'] as const)
      expect(gateway[name]).toBe(worker[name]);
    const store = new URL(withDefaults(worker.SESSIONLOG_STORE!));
    expect(store.protocol).toBe('postgres:');
    expect(store.hostname).toBe(FLEET.storeDatabase.service);
    expect(FLEET.storeDatabase.service).not.toBe(FLEET.temporalDatabase.service);
    expect(worker.TEMPORAL_ADDRESS).toBe(`${FLEET.temporal.service}:7233`);
    for (const name of [FLEET.worker.service, FLEET.gateway.service]) {
      expect(service(name).depends_on).toMatchObject({
        [FLEET.temporal.setupJobs[1]]: { condition: 'service_completed_successfully' },
        [FLEET.storeDatabase.service]: { condition: 'service_healthy' },
      });
    }
  });
});
