/**
 * No secret is stored (issue: boundaries): a provider that echoes the API key in its 401 text
 * (several do) must not get the key into the log, the status, the events over HTTP, an
 * export, Temporal's history or the worker's logs; a tool that prints a key-looking value is
 * scrubbed before its output is stored.
 */
import { Runtime, DefaultLogger, type LogEntry } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { SECRET_MARKER, scrubSecrets } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { startStack, type Stack } from '../support/stack.js';

const KEY = 'sk-live-Q7vZ3kP9mX2wL8tR4yN6bC1dF5gH0jS';
/** A value that looks like someone's key, printed by a tool (not configured anywhere). */
const LEAKED = 'sk-proj-ZZ11yy22XX33ww44VV55uu66TT77';

const logs: LogEntry[] = [];
// This file runs in its own process: capture every worker log line (the SDK logs activity failures).
Runtime.install({ logger: new DefaultLogger('DEBUG', (entry) => logs.push(entry)) });

const envTool: Tool = {
  name: 'print_env',
  description: 'Prints a configuration line.',
  parameters: { type: 'object', properties: {}, additionalProperties: false },
  async run() {
    return { text: `OPENAI_API_KEY=${LEAKED}\nHOME=/home/app` };
  },
};

let stack: Stack;
let gateway: RunningGateway;
beforeAll(async () => {
  stack = await startStack({
    apiKey: KEY,
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, envTool]),
      agent: { model: 'fake', tools: ['print_env'] },
    },
  });
  gateway = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 64 * 1024 });
});
afterAll(async () => {
  await gateway?.close();
  await stack?.close();
});

function expectNoSecret(where: string, text: string): void {
  expect(text.includes(KEY), `${where} holds the configured API key`).toBe(false);
  expect(text.includes(LEAKED), `${where} holds the key a tool printed`).toBe(false);
}

describe('secrets', () => {
  it('scrubs configured keys and key-looking values, keeping the rest of the text', () => {
    expect(scrubSecrets(`Incorrect API key provided: ${KEY}.`)).toBe(`Incorrect API key provided: ${SECRET_MARKER}.`);
    expect(scrubSecrets(`Authorization: Bearer abcdefghijklmnop1234`)).toBe(`Authorization: Bearer ${SECRET_MARKER}`);
    expect(scrubSecrets('an ordinary sentence about skis')).toBe('an ordinary sentence about skis');
  });

  it('a provider 401 that echoes the key never reaches the log, status, events, export, Temporal history or worker logs', async () => {
    const id = `secrets-401-${Date.now()}`;
    stack.fake.injectFault({ kind: 'auth_echo' });
    const reply = await stack.client.send(id, 'hello');
    expect(reply.outcome).toBe('error');
    // The provider really did echo it: the fake's recorded response carried the key.
    expect(stack.fake.requests().some((r) => r.status === 401)).toBe(true);

    const events = await stack.client.events(id);
    const turnEnd = events.find((e) => e.type === 'turn/end')!;
    expect(JSON.stringify(turnEnd.data)).toContain(SECRET_MARKER);
    expectNoSecret('the log', JSON.stringify(events));
    expectNoSecret('the status', JSON.stringify(await stack.client.status(id)));
    const http = await fetch(`${gateway.url}/v1/sessions/${id}/events`);
    expectNoSecret('GET /events', await http.text());
    expectNoSecret('the export', JSON.stringify(await stack.client.export(id)));
    const history = await stack.temporal.workflow.getHandle(workflowIdFor(id)).fetchHistory();
    // Payloads are bytes: decode them so a key inside one would show.
    const text = (value: unknown): string =>
      JSON.stringify(value, (_key, v: unknown) =>
        typeof v === 'bigint' ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : v,
      );
    expectNoSecret("Temporal's history", text(history));
    expectNoSecret('the worker logs', text(logs));
  });

  it("a tool's output that prints a key-looking value is stored scrubbed (artifact and log)", async () => {
    const id = `secrets-tool-${Date.now()}`;
    stack.fake.setMatcher((r) =>
      r.body.messages.at(-1)!.role === 'user'
        ? { text: 'checking', toolCalls: [{ name: 'print_env', arguments: {} }] }
        : { text: 'done' },
    );
    try {
      expect((await stack.client.send(id, 'show the config')).outcome).toBe('completed');
    } finally {
      stack.fake.setMatcher(undefined);
    }
    const events = await stack.client.events(id);
    const result = events.find((e) => e.type === 'tool/result')!;
    expect(JSON.stringify(result.data)).toContain(`OPENAI_API_KEY=${SECRET_MARKER}`);
    expectNoSecret('the log', JSON.stringify(events));
    const locator = (result.data as { meta: { locator: string } }).meta.locator;
    expectNoSecret('the artifact', await stack.store.artifacts.get(id, locator));
    expectNoSecret('the derived history', JSON.stringify(await stack.client.history(id)));
  });
});
