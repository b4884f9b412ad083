/**
 * What each tenant's sessions spent, kept by the store as it appends (DESIGN §5.3, issue 26):
 * the sums behind a tenant-wide cap (SESSIONLOG_TENANT_CAPS), read before each model call
 * without reading any log.
 *
 * Every batch the store appends adds what its events spent (session/budget.ts `spendOf`) to
 * its session's row, in the append's own transaction (SQLite, PostgreSQL): appends are
 * exactly-once, so the sums are exact. An erased session's row is folded into its tenant's
 * `.erased` row (no session id starts with a dot) before it is deleted, so erasing a session
 * removes its id but not what it spent. Spend logged before the store kept these rows (a store
 * made by an older build) is not in them.
 */
import type { SpendStore } from './store.js';
import { assertTenant, type SpendTotals } from '../session/index.js';

/** A tenant's totals: its sessions' spend, erased ones included; `sessions` counts the rows summed. */
export type TenantSpend = SpendTotals & { sessions: number };

/** The row that holds what a tenant's erased sessions spent. */
export const ERASED_SPEND_ROW = '.erased';

/** A SpendStore over a backend's sum query. */
export function spendStore(sum: (tenant: string) => Promise<TenantSpend>): SpendStore {
  return {
    async tenant(tenant) {
      assertTenant(tenant);
      return sum(tenant);
    },
  };
}
