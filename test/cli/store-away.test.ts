/**
 * A fleet process starting while its PostgreSQL store is restarting: every refusal PostgreSQL
 * sends while it starts, recovers or stops is retried by `sessionlog worker` and `serve`
 * (`untilConnected` with `isConnectivityError`, as src/cli/worker-process.ts calls it), and the
 * store opens once the server serves; a database that does not exist fails the start at once.
 *
 * CI saw a replacement worker exit on "the database system is not yet accepting connections"
 * (SQLSTATE 57P03, sent while recovery has not reached a consistent state), a refusal the text
 * match did not know. A real server says it only for a moment after a crash, so here a loopback
 * listener answers the real `pg` driver's start-up message with the server's refusal, byte for
 * byte as PostgreSQL 15 sends it, for the first attempts, then relays the connection to the real
 * server.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { isConnectivityError, untilConnected } from '../../src/cli/reconnect.js';
import { openStore } from '../../src/persistence/index.js';
import {
  dropPostgresTestSchemas,
  POSTGRES_TEST_URL,
  postgresTestSchema,
  postgresUrlWithSchema,
  probePostgres,
} from '../support/store-fixtures.js';

const available = await probePostgres();

/** PostgreSQL's ErrorResponse: 'E', its length, then (field type, C string) pairs and a final NUL. */
function errorResponse(fields: Record<string, string>): Buffer {
  const body = Buffer.concat([
    ...Object.entries(fields).map(([type, text]) => Buffer.from(`${type}${text}\0`, 'utf8')),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write('E', 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/** What PostgreSQL 15 answers a start-up message with while it is not serving (src/backend/postmaster). */
const REFUSALS = [
  { code: '57P03', message: 'the database system is starting up' },
  {
    code: '57P03',
    message: 'the database system is not yet accepting connections',
    detail: 'Consistent recovery state has not been yet reached.',
  },
  {
    code: '57P03',
    message: 'the database system is not accepting connections',
    detail: 'Hot standby mode is disabled.',
  },
  { code: '57P03', message: 'the database system is shutting down' },
  { code: '57P03', message: 'the database system is in recovery mode' },
  { code: '53300', message: 'sorry, too many clients already' },
];

/**
 * A listener in front of the real server: the first `refusals.length` connections read the
 * start-up message and get the next refusal, later ones are relayed to the real server.
 */
class RestartingPostgres {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  connections = 0;

  constructor(private readonly refusals: readonly (typeof REFUSALS)[number][]) {}

  async start(): Promise<string> {
    const real = new URL(POSTGRES_TEST_URL);
    this.server = createServer((socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => undefined);
      const refusal = this.refusals[this.connections++];
      if (refusal) {
        socket.once('data', () => {
          const fields: Record<string, string> = { S: 'FATAL', V: 'FATAL', C: refusal.code, M: refusal.message };
          if (refusal.detail) fields.D = refusal.detail;
          socket.end(errorResponse(fields));
        });
        return;
      }
      const upstream = connect(Number(real.port || 5432), real.hostname);
      this.sockets.add(upstream);
      upstream.on('close', () => this.sockets.delete(upstream));
      upstream.on('error', () => socket.destroy());
      socket.on('close', () => upstream.destroy());
      socket.pipe(upstream).pipe(socket);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const url = new URL(POSTGRES_TEST_URL);
    url.host = `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return url.toString();
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

describe.skipIf(!available.available)('a fleet process starting while its PostgreSQL store restarts', () => {
  afterAll(() => dropPostgresTestSchemas());

  it('each refusal of a starting, recovering or stopping server is UNAVAILABLE and retried', async () => {
    for (const refusal of REFUSALS) {
      const fake = new RestartingPostgres([refusal]);
      const base = await fake.start();
      try {
        const error = await openStore(postgresUrlWithSchema(postgresTestSchema(), base)).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, refusal.message).toMatchObject({ code: 'UNAVAILABLE' });
        expect((error as Error).message).toContain(refusal.message);
        expect(isConnectivityError(error), refusal.message).toBe(true);
      } finally {
        await fake.stop();
      }
    }
  });

  it('the start-up loop retries through a restart and opens the store once the server serves', async () => {
    // A crash's restart as a client sees it: starting up, recovering, then serving.
    const restart = REFUSALS.slice(0, 2);
    const fake = new RestartingPostgres(restart);
    const base = await fake.start();
    const lines: string[] = [];
    try {
      const url = postgresUrlWithSchema(postgresTestSchema(), base);
      const store = await untilConnected('store', () => openStore(url), {
        log: (line) => lines.push(line),
        signal: AbortSignal.timeout(120_000),
        retryable: isConnectivityError,
      });
      expect(store?.kind).toBe('postgres');
      await store!.close();
      expect(fake.connections).toBeGreaterThan(restart.length);
      expect(lines.filter((line) => line.includes('is unreachable'))).toHaveLength(restart.length);
      expect(lines.at(-1)).toBe(`store: connected after ${restart.length + 1} attempts`);
    } finally {
      await fake.stop();
    }
  }, 180_000);

  it('a database that does not exist fails the start at once', async () => {
    const url = new URL(POSTGRES_TEST_URL);
    url.pathname = '/sessionlog_no_such_database';
    const lines: string[] = [];
    const error = await untilConnected(
      'store',
      () => openStore(postgresUrlWithSchema(postgresTestSchema(), url.toString())),
      {
        log: (line) => lines.push(line),
        signal: AbortSignal.timeout(60_000),
        retryable: isConnectivityError,
      },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('does not exist') });
    expect(isConnectivityError(error)).toBe(false);
    expect(lines).toEqual([]);
  });
});
