/**
 * The PostgreSQL server a benchmark runs against: SESSIONLOG_BENCH_POSTGRES_URL (default the local
 * trust-auth server), each run in a fresh schema it drops at the end.
 */
import pg from 'pg';
import { parsePostgresUrl } from '../../src/persistence/relational/postgres/store.js';

export const POSTGRES_BENCH_URL =
  process.env.SESSIONLOG_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A fresh schema name for one run: `sl_bench_<random>`. */
export function benchSchema(): string {
  return `sl_bench_${Math.random().toString(36).slice(2, 10)}`;
}

/** The bench server's URL with `?schema=NAME` set. */
export function postgresBenchUrl(schema: string): string {
  const url = new URL(POSTGRES_BENCH_URL);
  url.searchParams.set('schema', schema);
  return url.toString();
}

/** Why no server answers at {@link POSTGRES_BENCH_URL}, or undefined when one does. */
export async function postgresUnreachable(): Promise<string | undefined> {
  const client = new pg.Client({
    connectionString: parsePostgresUrl(POSTGRES_BENCH_URL).connectionString,
    connectionTimeoutMillis: 5000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return undefined;
  } catch (error) {
    return (error as Error).message;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Drops a run's schema and everything in it. */
export async function dropBenchSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: parsePostgresUrl(POSTGRES_BENCH_URL).connectionString });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
