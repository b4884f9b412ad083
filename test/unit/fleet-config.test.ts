/**
 * The settings a fleet member reads (DESIGN §9): the worker's operations listener and drain
 * grace, and the workflow tunables a gateway gives the sessions it starts. Defaults are filled
 * in one place; a bad value fails at start-up naming the variable.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, resolveConfig } from '../../src/config.js';
import { DEFAULT_TUNABLES } from '../../src/workflows/api.js';

describe('fleet settings in resolveConfig', () => {
  it('defaults: no operations listener, a 10 s drain grace, the workflow tunables untouched', () => {
    const config = resolveConfig({});
    expect(config.ops).toEqual({ host: '127.0.0.1', port: undefined });
    expect(config.shutdownGraceMs).toBe(10_000);
    expect(config.tunables.modelHeartbeatMs).toBe(DEFAULT_TUNABLES.modelHeartbeatMs);
    expect(config.tunables.modelMaxAttempts).toBe(DEFAULT_TUNABLES.modelMaxAttempts);
    expect(config.devTemporalPort).toBe(7233);
  });

  it('lets `dev` start its Temporal dev server on another port, or a free one', () => {
    expect(resolveConfig({ TEMPORAL_DEV_PORT: '0' }).devTemporalPort).toBe(0);
    expect(resolveConfig({ TEMPORAL_DEV_PORT: '17233' }).devTemporalPort).toBe(17233);
  });

  it('reads the operations listener, the grace period and the model heartbeat and attempts', () => {
    const config = resolveConfig({
      SESSIONLOG_METRICS_HOST: '0.0.0.0',
      SESSIONLOG_METRICS_PORT: '0',
      SESSIONLOG_SHUTDOWN_GRACE_MS: '2500',
      SESSIONLOG_MODEL_HEARTBEAT_MS: '3000',
      SESSIONLOG_MODEL_MAX_ATTEMPTS: '30',
    });
    expect(config.ops).toEqual({ host: '0.0.0.0', port: 0 });
    expect(config.shutdownGraceMs).toBe(2500);
    expect(config.tunables).toMatchObject({ modelHeartbeatMs: 3000, modelMaxAttempts: 30 });
  });

  it('treats an empty value as unset (as Compose passes `${VAR:-}`)', () => {
    expect(resolveConfig({ SESSIONLOG_METRICS_PORT: '', SESSIONLOG_MODEL_HEARTBEAT_MS: '' }).ops.port).toBeUndefined();
  });

  it.each([
    ['SESSIONLOG_METRICS_PORT', '70000'],
    ['SESSIONLOG_METRICS_PORT', 'abc'],
    ['SESSIONLOG_SHUTDOWN_GRACE_MS', '-1'],
    ['SESSIONLOG_MODEL_HEARTBEAT_MS', '100'],
    ['SESSIONLOG_MODEL_MAX_ATTEMPTS', '0'],
    ['TEMPORAL_DEV_PORT', '65536'],
  ])('refuses %s=%s, naming the variable', (name, value) => {
    expect(() => resolveConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => resolveConfig({ [name]: value })).toThrow(new RegExp(`^${name}: `));
  });
});
