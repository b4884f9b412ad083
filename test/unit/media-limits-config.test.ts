/**
 * The media limits' settings (issue 50): SESSIONLOG_MAX_MEDIA_BYTES and SESSIONLOG_FETCH_IMAGE_URLS
 * read, defaulted and refused when bad, and the gateway's default body limit fitting a medium
 * sent as base64.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, resolveConfig } from '../../src/config.js';
import { DEFAULT_MAX_MEDIA_BYTES } from '../../src/session/index.js';

describe('the media limits (issue 50)', () => {
  it('default to 20 MiB and URLs kept as URLs, and read SESSIONLOG_MAX_MEDIA_BYTES and SESSIONLOG_FETCH_IMAGE_URLS', () => {
    expect(DEFAULT_MAX_MEDIA_BYTES).toBe(20 * 1024 * 1024);
    expect(resolveConfig({}).media).toMatchObject({ maxBytes: DEFAULT_MAX_MEDIA_BYTES, fetchImageUrls: false });
    expect(
      resolveConfig({ SESSIONLOG_MAX_MEDIA_BYTES: '1048576', SESSIONLOG_FETCH_IMAGE_URLS: 'true' }).media,
    ).toMatchObject({ maxBytes: 1048576, fetchImageUrls: true });
  });

  it('refuses a bad value naming the setting', () => {
    expect(() => resolveConfig({ SESSIONLOG_MAX_MEDIA_BYTES: '0' })).toThrow(ConfigError);
    expect(() => resolveConfig({ SESSIONLOG_MAX_MEDIA_BYTES: 'lots' })).toThrow(/SESSIONLOG_MAX_MEDIA_BYTES/);
    expect(() => resolveConfig({ SESSIONLOG_MAX_MEDIA_BYTES: String(2 ** 40) })).toThrow(/SESSIONLOG_MAX_MEDIA_BYTES/);
    expect(() => resolveConfig({ SESSIONLOG_FETCH_IMAGE_URLS: 'yes' })).toThrow(/SESSIONLOG_FETCH_IMAGE_URLS/);
  });

  it("the gateway's default body limit holds the largest medium as base64, and still twice the largest message", () => {
    const body = (env: Record<string, string>) => resolveConfig(env).gateway.bodyLimitBytes;
    expect(body({})).toBeGreaterThanOrEqual(Math.ceil((DEFAULT_MAX_MEDIA_BYTES * 4) / 3));
    expect(body({ SESSIONLOG_MAX_MEDIA_BYTES: String(64 * 1024 * 1024) })).toBeGreaterThanOrEqual(
      Math.ceil((64 * 1024 * 1024 * 4) / 3),
    );
    expect(body({ SESSIONLOG_MAX_MEDIA_BYTES: '1024', SESSIONLOG_MAX_MESSAGE_BYTES: String(10 * 1024 * 1024) })).toBe(
      2 * 10 * 1024 * 1024 + 1024 * 1024,
    );
    expect(body({ SESSIONLOG_BODY_LIMIT_BYTES: '4096' })).toBe(4096);
  });
});
