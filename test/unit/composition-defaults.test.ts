/**
 * The composition root's defaults, each filled in one step: the agent a configuration names
 * (`defaultAgent`, what `dev`, `worker` and `serve` run sessions that name none with) and the
 * worker's options (`resolveWorkerOptions`, what `createWorker` assembles from).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  OFFLINE_MODEL_KEPT_REQUESTS,
  defaultAgent,
  modelRouting,
  openConfiguredStore,
  startModel,
  type ModelRuntime,
  type SessionStore,
} from '../../src/compose.js';
import { resolveConfig } from '../../src/config.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { resolveWorkerOptions } from '../../src/worker.js';

describe('modelRouting', () => {
  it("lets requests use the workers' provider's models and their aliases, and runs the default for any other name", () => {
    const routing = modelRouting(resolveConfig({ DEEPSEEK_API_KEY: 'sk-test-routing' }));
    expect(routing.unknown).toBe('default');
    expect(routing.names['deepseek-flash']).toBe('deepseek-flash');
    expect(routing.names['deepseek-v4-pro']).toBe('deepseek-v4-pro');
    expect(routing.names['deepseek-chat']).toBe('deepseek-flash');
    // OpenAI's models are in the catalogue, but these workers call DeepSeek.
    expect(routing.names['gpt-4o']).toBeUndefined();
    const offline = modelRouting(resolveConfig({ SESSIONLOG_UNKNOWN_MODELS: 'refuse' }));
    expect(offline).toEqual({ names: { fake: 'fake' }, unknown: 'refuse' });
  });

  it('refuses an unknown SESSIONLOG_UNKNOWN_MODELS value, naming it', () => {
    expect(() => resolveConfig({ SESSIONLOG_UNKNOWN_MODELS: 'sometimes' })).toThrow(/SESSIONLOG_UNKNOWN_MODELS/);
  });
});

describe('SESSIONLOG_PACING and the budget tunables', () => {
  it('paces by the stated limits by default; off or JSON limits; refuses anything else, naming it', () => {
    expect(resolveConfig({}).pacing).toEqual({});
    expect(resolveConfig({ SESSIONLOG_PACING: 'off' }).pacing).toBe(false);
    expect(resolveConfig({ SESSIONLOG_PACING: '{"requestsPerMinute":500,"tokensPerMinute":200000}' }).pacing).toEqual({
      limits: { requestsPerMinute: 500, tokensPerMinute: 200_000 },
    });
    expect(() => resolveConfig({ SESSIONLOG_PACING: 'sometimes' })).toThrow(/SESSIONLOG_PACING must be auto, off/);
    expect(() => resolveConfig({ SESSIONLOG_PACING: '{"requestsPerMinute":-1}' })).toThrow(
      /SESSIONLOG_PACING: rate limit requestsPerMinute must be a positive number/,
    );
    expect(() => resolveConfig({ SESSIONLOG_PACING: '{"rpm":5}' })).toThrow(/unknown rate limit "rpm"/);
    // The worker's bucket key: the provider account, unless pacing is off.
    const model = { provider: 'deepseek', paceKey: 'deepseek:abc' } as never;
    const base = { store: {} as never, model, agent: { model: 'deepseek-flash', tools: [] } };
    expect(resolveWorkerOptions(base).pacing).toEqual({ key: 'deepseek:abc' });
    expect(resolveWorkerOptions({ ...base, pacing: false }).pacing).toBeUndefined();
    const tunables = resolveConfig({
      SESSIONLOG_BUDGET_WAIT_MS: '60000',
      SESSIONLOG_RATE_LIMIT_PAUSE_MS: '0',
    }).tunables;
    expect(tunables).toMatchObject({ budgetWaitMs: 60_000, rateLimitPauseMs: 0 });
    expect(() => resolveConfig({ SESSIONLOG_BUDGET_WAIT_MS: '-1' })).toThrow(/SESSIONLOG_BUDGET_WAIT_MS/);
    expect(resolveConfig({ SESSIONLOG_TENANT_BUDGETS: '{"acme":{"total":{"costUsd":5}}}' }).tenantBudgets).toEqual({
      acme: { total: { costUsd: 5 } },
    });
    expect(() => resolveConfig({ SESSIONLOG_TENANT_BUDGETS: '{"Acme!":{}}' })).toThrow(/not a tenant name/);
    expect(() => resolveConfig({ SESSIONLOG_TENANT_BUDGETS: '{"acme":{"total":{"tokens":-1}}}' })).toThrow(
      /SESSIONLOG_TENANT_BUDGETS.acme: budget.total.tokens/,
    );
    // A tenant's caps on all its sessions together: checked, and handed to the worker as a lookup.
    const tenantCaps = resolveConfig({
      SESSIONLOG_TENANT_CAPS: '{"acme":{"costUsd":50,"modelCalls":1000}}',
    }).tenantCaps;
    expect(tenantCaps).toEqual({ acme: { costUsd: 50, modelCalls: 1000 } });
    const capsOf = resolveWorkerOptions({ ...base, tenantCaps }).tenantCaps!;
    expect([capsOf('acme'), capsOf('bravo')]).toEqual([{ costUsd: 50, modelCalls: 1000 }, undefined]);
    expect(resolveWorkerOptions({ ...base, tenantCaps: {} }).tenantCaps).toBeUndefined();
    expect(() => resolveConfig({ SESSIONLOG_TENANT_CAPS: '{"Acme!":{}}' })).toThrow(/not a tenant name/);
    expect(() => resolveConfig({ SESSIONLOG_TENANT_CAPS: '{"acme":{"dollars":5}}' })).toThrow(
      /SESSIONLOG_TENANT_CAPS.acme: unknown cap "dollars"/,
    );
    expect(() => resolveConfig({ SESSIONLOG_TENANT_CAPS: '{"acme":{"tokens":1.5}}' })).toThrow(/whole number/);
    expect(() => resolveConfig({ SESSIONLOG_TENANT_CAPS: '[1]' })).toThrow(/object keyed by tenant/);
    expect(() => resolveWorkerOptions({ ...base, tenantCaps: { acme: { costUsd: -1 } } })).toThrow(
      /tenantCaps.acme: costUsd must be a finite number/,
    );
    expect(() => resolveConfig({ SESSIONLOG_GATEWAY_TOKENS: '{"short":{"tenant":"acme"}}' })).toThrow(
      /shorter than 16 characters/,
    );
    expect(() =>
      resolveConfig({ SESSIONLOG_GATEWAY_TOKENS: '{"0123456789abcdefX":{"tenant":"acme","rights":["root"]}}' }),
    ).toThrow(/unknown gateway token right "root"/);
    expect(
      resolveConfig({ SESSIONLOG_GATEWAY_TOKENS: '{"0123456789abcdefX":{"tenant":"acme","rights":["read"]}}' }).gateway
        .tokens,
    ).toEqual([{ token: '0123456789abcdefX', tenant: 'acme', rights: ['read'] }]);
    expect(() => resolveConfig({ SESSIONLOG_GATEWAY_TOKENS: '[1]' })).toThrow(/SESSIONLOG_GATEWAY_TOKENS/);
  });
});

describe('defaultAgent', () => {
  it('is the configured model with read_artifact, calculator and word_count, and no request settings unless set', () => {
    expect(defaultAgent(resolveConfig({}))).toEqual({
      model: 'fake',
      tools: ['read_artifact', 'calculator', 'word_count'],
    });
  });

  it('carries the system prompt, output limit, thinking mode and reasoning effort the environment sets', () => {
    const config = resolveConfig({
      DEEPSEEK_API_KEY: 'sk-test-composition',
      SESSIONLOG_SYSTEM_PROMPT: 'Be brief.',
      SESSIONLOG_MAX_TOKENS: '512',
      SESSIONLOG_THINKING: 'disabled',
      SESSIONLOG_REASONING_EFFORT: 'high',
    });
    expect(defaultAgent(config)).toEqual({
      model: 'deepseek-flash',
      tools: ['read_artifact', 'calculator', 'word_count'],
      system: 'Be brief.',
      maxTokens: 512,
      thinking: false,
      reasoningEffort: 'high',
    });
  });
});

describe('resolveWorkerOptions', () => {
  let store: SessionStore;
  let model: ModelRuntime;
  beforeAll(async () => {
    const config = resolveConfig({ SESSIONLOG_STORE: 'sqlite::memory:' });
    store = await openConfiguredStore(config);
    model = await startModel(config);
  });
  afterAll(async () => {
    await model.offline?.close();
    await store.close();
  });

  it('the offline model (dev and worker without an API key) keeps only its latest requests, not every prompt it was sent', async () => {
    const offline = model.offline!;
    for (let i = 0; i < OFFLINE_MODEL_KEPT_REQUESTS + 5; i++) await (await fetch(`${offline.baseURL}/models`)).text();
    expect(offline.requests()).toHaveLength(OFFLINE_MODEL_KEPT_REQUESTS);
  });

  it('fills every default a worker runs with when the caller gives only store, model and agent', async () => {
    const resolved = resolveWorkerOptions({ store, model: model.model, agent: { model: 'fake', tools: [] } });
    expect(resolved).toMatchObject({
      address: '127.0.0.1:7233',
      connection: undefined,
      namespace: 'default',
      taskQueue: 'sessionlog',
      approval: { mode: 'never' },
      heartbeatMs: 1000,
      learnLimits: true,
      checkpoints: { minEvents: 256, ratio: 0.25 },
      workerOptions: {},
      telemetry: undefined,
      workflowInterceptorModules: [],
    });
    const names = BUILTIN_TOOLS.map((t) => t.name);
    expect(resolved.tools.schemas(names).map((s) => s.name)).toEqual(names);
    expect(resolved.context).toBeDefined();
    // Tool output up to 16 KiB is kept whole; above it, it is spilled behind a preview.
    const call = { sessionId: 's', callId: 'c', toolName: 'calculator', locator: 'artifact://s/c' };
    expect(await resolved.shapeToolResult({ ...call, text: 'x'.repeat(16 * 1024) })).toBe('x'.repeat(16 * 1024));
    expect((await resolved.shapeToolResult({ ...call, text: 'x'.repeat(16 * 1024 + 1) })).length).toBeLessThan(
      16 * 1024,
    );
  });

  it('leaves context management out for `context: false`, and stops learning limits when asked', () => {
    const base = { store, model: model.model, agent: { model: 'fake', tools: [] } };
    expect(resolveWorkerOptions({ ...base, context: false }).context).toBeUndefined();
    expect(resolveWorkerOptions({ ...base, context: { learnLimits: false } }).learnLimits).toBe(false);
  });
});
