/**
 * Tenants (DESIGN §5.3, issue 26): each session belongs to one tenant, named in its header at
 * create and never changed (`tenant`; a header without one belongs to {@link DEFAULT_TENANT}).
 *
 * The store API itself takes a {@link TenantScope} for `list` and `erase` (no unscoped list or
 * delete exists; the backend applies the scope, the erase inside its own transaction).
 * {@link scopeStore} is the store as one tenant sees it: every operation that names a session
 * first reads the session's header and answers SESSION_NOT_FOUND, exactly as for an id that does
 * not exist, when the session is another tenant's; `list` and `search` see only the tenant's
 * sessions; `create` stamps the tenant into the header. The gateway hands each request a client
 * over its token's tenant's scope, so no route can reach another tenant's data, whatever id it
 * is given. Refused cross-tenant attempts are reported to `onCrossTenant` (logged and counted).
 *
 * What one tenant can still learn of another: that a session id is taken (a `create` of it is
 * refused as SESSION_ALREADY_EXISTS, because ids are global). Nothing of its content.
 */
import {
  DEFAULT_TENANT,
  SessionlogError,
  assertTenant,
  type NewEvent,
  type SessionHeader,
  type StoredEvent,
  type SurfaceSnapshot,
  tenantOf,
} from '../session/index.js';
import type { ArtifactPut, MediaPut } from './artifacts.js';
import { notFound } from './errors.js';
import type { SearchOptions } from './search.js';
import type { PrefixAnchor } from './anchor.js';
import {
  assertTenantScope,
  tenantScope,
  type AppendOptions,
  type InboxStore,
  type SessionKeyStore,
  type SessionStore,
  type TenantScope,
  type TranscriptIndex,
  type WatchOptions,
} from './store.js';
import type { ArtifactStore, ProjectionCacheStore } from './store.js';

/** A refused attempt on another tenant's session: who tried, on what. */
export type CrossTenantAttempt = { tenant: string; sessionId: string; operation: string };

/** Whose session `id` is to `tenant`: its own, another tenant's, or none (missing or erased: the store answers). */
export async function sessionOwner(
  store: SessionStore,
  tenant: string,
  id: string,
): Promise<'own' | 'foreign' | 'none'> {
  let header: SessionHeader;
  try {
    header = await store.header(id);
  } catch (error) {
    if (error instanceof SessionlogError && error.code === 'SESSION_NOT_FOUND') return 'none';
    throw error;
  }
  return tenantOf(header) === tenant ? 'own' : 'foreign';
}

/** The store as `tenant` sees it (see the top of this file). */
export function scopeStore(
  store: SessionStore,
  tenant: string,
  onCrossTenant: (attempt: CrossTenantAttempt) => void = () => undefined,
): SessionStore {
  assertTenant(tenant);
  const own = tenantScope(tenant);
  /** {@link sessionOwner}, with another tenant's session reported. */
  const ownerOf = async (id: string, operation: string): Promise<'own' | 'foreign' | 'none'> => {
    const owner = await sessionOwner(store, tenant, id);
    if (owner === 'foreign') onCrossTenant({ tenant, sessionId: id, operation });
    return owner;
  };
  /** This tenant's scope, unless `scope` names another tenant (then undefined: nothing of it is visible). */
  const within = (scope: TenantScope): TenantScope | undefined => {
    assertTenantScope(scope);
    return 'tenant' in scope && scope.tenant !== tenant ? undefined : own;
  };
  const owns = async (id: string, operation: string): Promise<boolean> => (await ownerOf(id, operation)) === 'own';
  /**
   * Runs `body` unless the session is another tenant's (SESSION_NOT_FOUND, as for no session).
   * An id with no session keeps the store's own answer (a tombstone says SESSION_ERASED), and so
   * does what may name a session before it exists (inbox entries, keys).
   */
  const guarded =
    <A extends unknown[], R>(operation: string, body: (id: string, ...rest: A) => Promise<R>) =>
    async (id: string, ...rest: A): Promise<R> => {
      if ((await ownerOf(id, operation)) === 'foreign') throw notFound(id);
      return body(id, ...rest);
    };

  const artifacts: ArtifactStore = {
    put: async (input: ArtifactPut) => {
      if (!(await owns(input.sessionId, 'artifacts.put'))) throw notFound(input.sessionId);
      return store.artifacts.put(input);
    },
    get: guarded('artifacts.get', (id, locator: string) => store.artifacts.get(id, locator)),
    read: guarded('artifacts.read', (id, locator: string, offset: number, limit: number) =>
      store.artifacts.read(id, locator, offset, limit),
    ),
    putMedia: async (input: MediaPut) => {
      if (!(await owns(input.sessionId, 'artifacts.putMedia'))) throw notFound(input.sessionId);
      return store.artifacts.putMedia(input);
    },
    readMedia: guarded('artifacts.readMedia', (id, locator: string) => store.artifacts.readMedia(id, locator)),
  };
  const projectionCache: ProjectionCacheStore = {
    get: guarded('projectionCache.get', (id) => store.projectionCache.get(id)),
    put: guarded('projectionCache.put', (id, record: Parameters<ProjectionCacheStore['put']>[1]) =>
      store.projectionCache.put(id, record),
    ),
  };
  const inbox: InboxStore = {
    put: guarded('inbox.put', (id, key: string, body: string) => store.inbox.put(id, key, body)),
    get: guarded('inbox.get', (id, key: string) => store.inbox.get(id, key)),
    remove: guarded('inbox.remove', (id, keys: readonly string[]) => store.inbox.remove(id, keys)),
    list: guarded('inbox.list', (id) => store.inbox.list(id)),
  };
  const sessionKeys: SessionKeyStore = {
    obtain: guarded('sessionKeys.obtain', (id) => store.sessionKeys.obtain(id)),
    find: guarded('sessionKeys.find', (id) => store.sessionKeys.find(id)),
  };
  const transcripts: TranscriptIndex = {
    put: async (scope, digest, entry) => {
      if (!(await owns(entry.sessionId, 'transcripts.put'))) throw notFound(entry.sessionId);
      return store.transcripts.put(scope, digest, entry);
    },
    get: async (scope, digest) => {
      const entry = await store.transcripts.get(scope, digest);
      return entry && (await owns(entry.sessionId, 'transcripts.get')) ? entry : undefined;
    },
  };

  return {
    kind: store.kind,
    async create(header: SessionHeader) {
      if (header.tenant !== undefined && header.tenant !== tenant)
        throw new SessionlogError(
          'INVALID_ARGUMENT',
          `a session of tenant ${tenant} cannot be created for tenant ${header.tenant}`,
        );
      await store.create(tenant === DEFAULT_TENANT ? header : { ...header, tenant });
    },
    header: guarded('header', (id) => store.header(id)),
    exists: async (id) => (await store.exists(id)) && (await owns(id, 'exists')),
    append: guarded('append', (id, events: readonly NewEvent[], options: AppendOptions) =>
      store.append(id, events, options),
    ),
    readFrom: guarded('readFrom', (id, fromSeq: number, limit?: number) => store.readFrom(id, fromSeq, limit)),
    nextSeq: guarded('nextSeq', (id) => store.nextSeq(id)),
    load: guarded('load', (id) => store.load(id)),
    inspect: guarded('inspect', (id) => store.inspect(id)),
    session: guarded('session', (id) => store.session(id)),
    readAnchored: guarded('readAnchored', (id, anchor: PrefixAnchor, surface: SurfaceSnapshot) =>
      store.readAnchored(id, anchor, surface),
    ),
    prefixAnchor: guarded('prefixAnchor', (id, seq: number) => store.prefixAnchor(id, seq)),
    scan: guarded('scan', (id) => store.scan(id)),
    // The backend checks the tenant again inside the erase's own transaction (store.ts).
    erase: guarded('erase', (id, scope: TenantScope) => {
      const visible = within(scope);
      if (!visible) throw notFound(id);
      return store.erase(id, visible);
    }),
    list: async (scope: TenantScope) => {
      const visible = within(scope);
      return visible ? store.list(visible) : [];
    },
    search: guarded('search', (id, query: string, options?: SearchOptions) => store.search(id, query, options)),
    watch(id: string, fromSeq: number, options?: WatchOptions): AsyncIterable<StoredEvent> {
      return {
        async *[Symbol.asyncIterator]() {
          if ((await ownerOf(id, 'watch')) === 'foreign') throw notFound(id);
          yield* store.watch(id, fromSeq, options);
        },
      };
    },
    artifacts,
    projectionCache,
    inbox,
    sessionKeys,
    transcripts,
    pacing: store.pacing,
    spend: {
      async tenant(name: string) {
        assertTenant(name);
        if (name !== tenant)
          throw new SessionlogError('INVALID_ARGUMENT', `this store sees tenant ${tenant}'s spend, not ${name}'s`);
        return store.spend.tenant(name);
      },
    },
    // The scope does not own the store: closing it is the owner's.
    close: async () => undefined,
  };
}
