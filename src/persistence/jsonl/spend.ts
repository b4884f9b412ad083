/** The JSONL backend's spend store (spend.ts `SpendStore`). */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import {
  SessionlogError,
  addSpend,
  emptySpend,
  spendOfEvents,
  type SpendTotals,
  type SessionHeader,
} from '../../session/index.js';
import { acquireFileLock } from './file-lock.js';
import type { TenantSpend } from '../spend.js';
import { tenantScope, type ResolvedStoreOptions } from '../store.js';
import { replaceFile, readIfExists, parseJsonOrUndefined } from './files.js';
import { SPEND_DIR } from './layout.js';
import type { JsonlSessionStore } from './store.js';

/**
 * A tenant's spend in the JSONL store (store.ts describes it): summed from its sessions' logs plus
 * its `.erased` file, which an erasure adds to under the tenant's lock file.
 */
export class JsonlSpend {
  constructor(
    private readonly store: JsonlSessionStore,
    private readonly options: ResolvedStoreOptions,
  ) {}

  /** The tenant's sessions' spend, from their validated copies, plus what its erased sessions spent. */
  async tenantSpend(tenant: string): Promise<TenantSpend> {
    this.store.assertOpen();
    const erased = await readIfExists(join(this.store.layout.root, SPEND_DIR, `${tenant}.erased.json`));
    const total: TenantSpend = {
      ...(erased === undefined ? emptySpend() : this.parseSpend(erased, tenant)),
      sessions: 0,
    };
    for (const header of await this.store.list(tenantScope(tenant))) {
      let spent: SpendTotals | undefined;
      try {
        spent = await this.sessionSpend(header);
      } catch (error) {
        // Erased since it was listed, or damaged: nothing of it can be read.
        if (error instanceof SessionlogError) continue;
        throw error;
      }
      if (!spent) continue;
      addSpend(total, spent);
      total.sessions += 1;
    }
    return total;
  }

  /** What a session spent: its events after the prefix a fork or salvage copied (the header's `seedLength`). */
  private async sessionSpend(header: SessionHeader): Promise<SpendTotals | undefined> {
    return spendOfEvents(await this.store.readFrom(header.id, header.seedLength ?? 0));
  }

  private parseSpend(text: string, tenant: string): SpendTotals {
    const spent = parseJsonOrUndefined(text) as Partial<SpendTotals> | null | undefined;
    const fields = ['tokens', 'costUsd', 'modelCalls', 'toolCalls', 'wallMs'] as const;
    if (!spent || typeof spent !== 'object' || !fields.every((f) => Number.isFinite(spent[f])))
      throw new SessionlogError(
        'CORRUPT_LOG',
        `${join(this.store.layout.root, SPEND_DIR, `${tenant}.erased.json`)} does not hold a tenant's spend`,
      );
    return {
      tokens: spent.tokens!,
      costUsd: spent.costUsd!,
      modelCalls: spent.modelCalls!,
      toolCalls: spent.toolCalls!,
      wallMs: spent.wallMs!,
    };
  }

  /** Adds what an erased session spent to its tenant's `.erased` file, under the tenant's lock file. */
  async retire(tenant: string, spent: SpendTotals): Promise<void> {
    const dir = join(this.store.layout.root, SPEND_DIR);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const path = join(dir, `${tenant}.erased.json`);
    const lock = await acquireFileLock(join(dir, `${tenant}.lock`), {
      timeoutMs: this.options.lockTimeoutMs,
      staleMs: this.options.lockStaleMs,
    });
    try {
      const text = await readIfExists(path);
      const total = text === undefined ? emptySpend() : this.parseSpend(text, tenant);
      addSpend(total, spent);
      await replaceFile(path, dir, JSON.stringify(total));
    } finally {
      await lock.release();
    }
  }
}
