import { describe, expect, it } from 'vitest';
import { mediaCheck } from '../../src/compose.js';
import { ConfigError, resolveConfig } from '../../src/config.js';
import { DEFAULT_MODEL_CATALOGUE } from '../../src/model/catalogue.js';
import { resolveWorkerOptions } from '../../src/worker.js';
import { openStore } from '../../src/persistence/index.js';

describe('the media policy settings (issue 50)', () => {
  it('default to the last 3 user turns and a refusal, and read SESSIONLOG_MEDIA_RECENT_TURNS and SESSIONLOG_MEDIA_UNSUPPORTED', () => {
    expect(resolveConfig({}).media).toMatchObject({ recentTurns: 3, unsupported: 'refuse' });
    expect(
      resolveConfig({ SESSIONLOG_MEDIA_RECENT_TURNS: '0', SESSIONLOG_MEDIA_UNSUPPORTED: 'stand-in' }).media,
    ).toMatchObject({ recentTurns: 0, unsupported: 'stand-in' });
  });

  it('refuses a bad value naming the setting', () => {
    expect(() => resolveConfig({ SESSIONLOG_MEDIA_RECENT_TURNS: 'three' })).toThrow(ConfigError);
    expect(() => resolveConfig({ SESSIONLOG_MEDIA_RECENT_TURNS: '-1' })).toThrow(/SESSIONLOG_MEDIA_RECENT_TURNS/);
    expect(() => resolveConfig({ SESSIONLOG_MEDIA_UNSUPPORTED: 'drop' })).toThrow(/SESSIONLOG_MEDIA_UNSUPPORTED/);
  });

  it("the worker resolves the policy once; the client's check uses the default model when a message names none", async () => {
    const store = await openStore('sqlite::memory:');
    try {
      const model = {
        provider: 'fake',
        model: () => DEFAULT_MODEL_CATALOGUE.models.fake!,
        stream: () => Promise.reject(new Error('unused')),
      };
      const base = { store, model: model as never, agent: { model: 'fake', tools: [] } };
      expect(resolveWorkerOptions(base).media).toEqual({ recentTurns: 3, unsupported: 'refuse' });
      expect(resolveWorkerOptions({ ...base, media: { recentTurns: 1 } }).media).toEqual({
        recentTurns: 1,
        unsupported: 'refuse',
      });
      expect(() => resolveWorkerOptions({ ...base, media: { recentTurns: -2 } })).toThrow(/recentTurns/);
    } finally {
      await store.close();
    }
    const check = mediaCheck(DEFAULT_MODEL_CATALOGUE, 'deepseek-flash', 'refuse');
    expect(() => check(undefined, [{ type: 'file' }])).toThrow(/model "deepseek-flash" does not take files/);
    expect(() => check('fake', [{ type: 'file' }])).not.toThrow();
    // A model the catalogue does not know is the agent check's to refuse.
    expect(() => check('no-such-model', [{ type: 'image' }])).not.toThrow();
  });
});
