/**
 * The shared conformance suite against the PostgreSQL backend, each test in a fresh schema
 * `sl_test_<random>` dropped afterwards. Skips (saying why) only when no server answers at
 * SESSIONLOG_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test).
 */
import { afterEach, describe, it } from 'vitest';
import { dropPostgresTestSchemas, postgresFixture, probePostgres } from '../support/store-fixtures.js';
import { runStoreConformance } from './store.conformance.js';

const probe = await probePostgres();
if (probe.available) {
  runStoreConformance(postgresFixture);
  // Runs after the suite's own afterEach has closed the stores.
  afterEach(() => dropPostgresTestSchemas());
} else {
  console.warn(`PostgreSQL conformance suite skipped: ${probe.reason}`);
  describe.skip(`SessionStore conformance: postgres (skipped: ${probe.reason})`, () => {
    it('needs a PostgreSQL server', () => undefined);
  });
}
