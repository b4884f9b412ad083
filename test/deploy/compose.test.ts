/**
 * docker-compose.yml is checked by Compose itself (`docker compose config` resolves and
 * validates the file without a Docker engine): the services and their start-up order are
 * there, the workers and the gateways share the PostgreSQL store, and the file cannot be
 * configured without SESSIONLOG_GATEWAY_TOKEN or the databases' passwords. That it matches what
 * the fleet test runs is test/fleet/topology.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const COMPOSE_FILE = join(ROOT, 'docker-compose.yml');

/**
 * `docker compose` (Compose v2, the CLI plugin). The old Python `docker-compose` 1.x is not
 * used: it reads neither inline `configs.content` nor `config --format json`.
 */
function findCompose(): { command: string[]; reason?: undefined } | { command?: undefined; reason: string } {
  if (spawnSync('docker', ['--version'], { encoding: 'utf8' }).error)
    return { reason: 'the docker client is not installed' };
  // Where only the client is installed, build the Compose plugin from the Go module proxy (idempotent).
  spawnSync(join(ROOT, 'scripts/docker-compose-plugin'), { stdio: 'inherit', timeout: 20 * 60_000 });
  if (spawnSync('docker', ['compose', 'version'], { encoding: 'utf8' }).status === 0)
    return { command: ['docker', 'compose'] };
  return { reason: 'the docker client is installed but its Compose v2 plugin is not (`docker compose version` fails)' };
}

const compose = findCompose();
if (compose.reason) console.warn(`test/deploy/compose.test.ts skipped: ${compose.reason}`);

// Every variable docker-compose.yml reads, so the caller's environment cannot leak into a check.
const COMPOSE_VARIABLES = [
  ...new Set([...readFileSync(COMPOSE_FILE, 'utf8').matchAll(/\$\{([A-Z0-9_]+)/g)].map((m) => m[1]!)),
];
const REQUIRED = {
  SESSIONLOG_GATEWAY_TOKEN: 'compose-test-token-0123456789',
  TEMPORAL_DB_PASSWORD: 'compose-test-db-password',
  SESSIONLOG_DB_PASSWORD: 'composetestsessionlogpassword',
};

// An empty env file keeps a developer's own .env out of the checks.
const scratch = mkdtempSync(join(tmpdir(), 'sessionlog-compose-'));
const EMPTY_ENV_FILE = join(scratch, 'empty.env');
writeFileSync(EMPTY_ENV_FILE, '');
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function composeConfig(vars: Record<string, string>): { status: number | null; stdout: string; stderr: string } {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of COMPOSE_VARIABLES) delete env[name];
  const [bin, ...args] = compose.command!;
  const result = spawnSync(
    bin!,
    [
      ...args,
      '--env-file',
      EMPTY_ENV_FILE,
      '--project-directory',
      ROOT,
      '-f',
      COMPOSE_FILE,
      'config',
      '--format',
      'json',
    ],
    {
      env: { ...env, ...vars },
      encoding: 'utf8',
      timeout: 30_000,
    },
  );
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

type Service = {
  image?: string;
  command?: string[];
  environment?: Record<string, string | null>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  deploy?: { replicas?: number };
  volumes?: Array<{ type: string; source: string; target: string }>;
  ports?: Array<{ target: number; published: string; host_ip?: string }>;
};

describe.skipIf(compose.reason !== undefined)(
  `docker-compose.yml (${compose.reason ?? 'validated by Compose'})`,
  () => {
    it('resolves with the required variables: every service, pinned images, the start-up order and healthchecks', () => {
      const result = composeConfig(REQUIRED);
      expect(result.stderr).not.toMatch(/error/i);
      expect(result.status).toBe(0);
      const { services } = JSON.parse(result.stdout) as { services: Record<string, Service> };
      expect(Object.keys(services).sort()).toEqual([
        'postgresql',
        'sessionlog-gateway',
        'sessionlog-postgresql',
        'sessionlog-worker',
        'temporal',
        'temporal-namespace',
        'temporal-schema',
        'temporal-ui',
      ]);

      // Third-party images carry an explicit version tag.
      for (const name of [
        'postgresql',
        'sessionlog-postgresql',
        'temporal',
        'temporal-schema',
        'temporal-namespace',
        'temporal-ui',
      ])
        expect(services[name]!.image).toMatch(/:\d+\.\d+/);
      expect(services.temporal!.environment!.DB).toBe('postgres12');

      const condition = (service: string, on: string) => services[service]!.depends_on?.[on]?.condition;
      expect(condition('temporal-schema', 'postgresql')).toBe('service_healthy');
      expect(condition('temporal', 'temporal-schema')).toBe('service_completed_successfully');
      expect(condition('temporal-namespace', 'temporal')).toBe('service_healthy');
      expect(condition('temporal-ui', 'temporal')).toBe('service_healthy');
      expect(condition('sessionlog-worker', 'temporal-namespace')).toBe('service_completed_successfully');
      expect(condition('sessionlog-gateway', 'temporal-namespace')).toBe('service_completed_successfully');
      expect(condition('sessionlog-worker', 'sessionlog-postgresql')).toBe('service_healthy');
      expect(condition('sessionlog-gateway', 'sessionlog-postgresql')).toBe('service_healthy');
      for (const name of [
        'postgresql',
        'sessionlog-postgresql',
        'temporal',
        'temporal-ui',
        'sessionlog-worker',
        'sessionlog-gateway',
      ])
        expect(services[name]!.healthcheck?.test.length).toBeGreaterThan(0);
    });

    it('runs 3 workers and 2 gateways from the image on one PostgreSQL store, with readiness checks', () => {
      const { services } = JSON.parse(composeConfig(REQUIRED).stdout) as { services: Record<string, Service> };
      const worker = services['sessionlog-worker']!;
      const gateway = services['sessionlog-gateway']!;
      expect(worker.command).toEqual(['worker']);
      expect(gateway.command).toEqual(['serve', '--host', '0.0.0.0', '--port', '8787']);
      expect(worker.deploy?.replicas).toBe(3);
      expect(gateway.deploy?.replicas).toBe(2);
      expect(gateway.environment!.SESSIONLOG_GATEWAY_TOKEN).toBe(REQUIRED.SESSIONLOG_GATEWAY_TOKEN);
      for (const service of [worker, gateway]) {
        expect(service.environment!.SESSIONLOG_STORE).toBe(
          `postgres://sessionlog:${REQUIRED.SESSIONLOG_DB_PASSWORD}@sessionlog-postgresql:5432/sessionlog`,
        );
        expect(service.environment!.TEMPORAL_ADDRESS).toBe('temporal:7233');
        expect(service.healthcheck!.test.join(' ')).toContain('/readyz');
      }
      // Published on loopback unless the operator says otherwise, one host port per gateway.
      expect(gateway.ports).toContainEqual(
        expect.objectContaining({ target: 8787, published: '8787-8788', host_ip: '127.0.0.1' }),
      );
    });

    it("refuses to resolve without the password of sessionlog's database", () => {
      const { SESSIONLOG_DB_PASSWORD: _password, ...withoutPassword } = REQUIRED;
      const result = composeConfig(withoutPassword);
      expect(result.status).not.toBe(0);
      expect(result.stderr).toContain('SESSIONLOG_DB_PASSWORD');
    });

    it('refuses to resolve without SESSIONLOG_GATEWAY_TOKEN, or with it empty, naming the variable', () => {
      const { SESSIONLOG_GATEWAY_TOKEN: _token, ...withoutToken } = REQUIRED;
      for (const vars of [withoutToken, { ...withoutToken, SESSIONLOG_GATEWAY_TOKEN: '' }]) {
        const result = composeConfig(vars);
        expect(result.status).not.toBe(0);
        expect(result.stderr).toContain('SESSIONLOG_GATEWAY_TOKEN');
      }
    });

    it("refuses to resolve without the password of Temporal's database", () => {
      const { TEMPORAL_DB_PASSWORD: _password, ...withoutPassword } = REQUIRED;
      const result = composeConfig(withoutPassword);
      expect(result.status).not.toBe(0);
      expect(result.stderr).toContain('TEMPORAL_DB_PASSWORD');
    });
  },
);
