/**
 * Test helpers around the fake model server (src/model/fake-server.ts): one server per test
 * file, reset before each test, and a remote control for servers in another process.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { startFakeModelServer } from '../../src/model/fake-server.js';
import type {
  FakeFault,
  FakeModelConfig,
  FakeModelServer,
  FakeModelServerOptions,
  FakeReply,
  RecordedRequest,
} from '../../src/model/fake-server.js';

export type { FakeFault, FakeModelServer, FakeReply, RecordedRequest };

/**
 * Starts a fake model server for the current test file and resets it (and restores its
 * config) before each test. Use the returned getter inside tests: `const fake = useFakeModel();
 * … fake().enqueueReplies(…)`.
 */
export function useFakeModel(options: FakeModelServerOptions = {}): () => FakeModelServer {
  let server: FakeModelServer | undefined;
  let initialConfig: FakeModelConfig | undefined;
  beforeAll(async () => {
    server = await startFakeModelServer(options);
    initialConfig = server.currentConfig();
  });
  beforeEach(() => {
    server?.reset();
    if (initialConfig) server?.configure(initialConfig);
  });
  afterAll(async () => {
    await server?.close();
  });
  return () => {
    if (!server)
      throw new Error('the fake model server is not running (useFakeModel must be called at file or describe level)');
    return server;
  };
}

/** A real `openai` client pointed at the fake server, with client retries off. */
export function fakeModelClient(server: FakeModelServer, options: { timeoutMs?: number } = {}): OpenAI {
  return new OpenAI({
    baseURL: server.baseURL,
    apiKey: 'test-key',
    maxRetries: 0,
    timeout: options.timeoutMs ?? 30_000,
  });
}

/** Drives a fake model server over its `/_control` HTTP endpoints (e.g. in another process). */
export class FakeModelRemote {
  /** `url` is the server root, `http://127.0.0.1:PORT` (not the `/v1` base URL). */
  constructor(readonly url: string) {}

  injectFaults(...faults: FakeFault[]): Promise<unknown> {
    return this.call('POST', '/_control/faults', faults);
  }
  clearFaults(): Promise<unknown> {
    return this.call('DELETE', '/_control/faults');
  }
  enqueueReplies(...replies: FakeReply[]): Promise<unknown> {
    return this.call('POST', '/_control/replies', replies);
  }
  configure(patch: Partial<FakeModelConfig>): Promise<unknown> {
    return this.call('POST', '/_control/config', patch);
  }
  requests(): Promise<RecordedRequest[]> {
    return this.call('GET', '/_control/requests') as Promise<RecordedRequest[]>;
  }
  reset(): Promise<unknown> {
    return this.call('POST', '/_control/reset');
  }

  private async call(method: string, path: string, body?: unknown): Promise<unknown> {
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { 'content-type': 'application/json' };
    }
    const response = await fetch(`${this.url}${path}`, init);
    const payload: unknown = await response.json();
    if (!response.ok)
      throw new Error(
        `fake model control ${method} ${path} failed with ${response.status}: ${JSON.stringify(payload)}`,
      );
    return payload;
  }
}
