/** The relational backends' spend store (the `spend` rows). */
import { spendStore } from '../spend.js';
import { step, type RelationalDriver, type Use } from './driver.js';
import type { SpendStore } from '../store.js';

/** What sessions spent, in the `spend` rows each append adds to (summed per tenant by the driver). */
export function relationalSpend(use: Use, driver: RelationalDriver): SpendStore {
  return spendStore((tenant) => use(() => driver.run('single', (tx) => step(tx.tenantSpend(tenant)))));
}
