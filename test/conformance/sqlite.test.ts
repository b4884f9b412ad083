import { sqliteFixture } from '../support/store-fixtures.js';
import { runStoreConformance } from './store.conformance.js';

runStoreConformance(sqliteFixture);
