/** The relational backends' artifact store (the `artifacts` table). */
import {
  artifactLocator,
  artifactNotFound,
  artifactWindow,
  assertArtifactPut,
  ownArtifactName,
  uniqueArtifactNames,
  assertMediaPut,
  ownMediaName,
  storedMediaOf,
  type ArtifactPut,
  type ArtifactRef,
  type MediaPut,
} from '../artifacts.js';
import type { StoredMedia } from '../../session/index.js';
import { notFound } from '../errors.js';
import { step, type RelationalDriver, type RelationalTx, type Steps, type Use } from './driver.js';
import type { ArtifactStore } from '../store.js';

/** Artifacts in the `artifacts` table. */
export class RelationalArtifacts implements ArtifactStore {
  constructor(
    private readonly use: Use,
    private readonly driver: RelationalDriver,
  ) {}

  put(input: ArtifactPut): Promise<ArtifactRef> {
    return this.use(() => {
      assertArtifactPut(input);
      return this.driver.run('write', (tx) => putArtifact(tx, input));
    });
  }

  get(sessionId: string, locator: string): Promise<string> {
    return this.use(() => this.content(sessionId, locator));
  }

  read(sessionId: string, locator: string, offset: number, limit: number): Promise<{ text: string; total: number }> {
    return this.use(async () => artifactWindow(await this.content(sessionId, locator), offset, limit));
  }

  putMedia(input: MediaPut): Promise<StoredMedia> {
    return this.use(() => {
      assertMediaPut(input);
      return this.driver.run('write', (tx) => putMediaRow(tx, input));
    });
  }

  readMedia(sessionId: string, locator: string): Promise<Uint8Array> {
    return this.use(async () => {
      const name = ownMediaName(sessionId, locator);
      const content = await this.driver.run('single', (tx) => step(tx.mediaContent(sessionId, name)));
      if (content === undefined) throw artifactNotFound(locator);
      return content;
    });
  }

  private async content(sessionId: string, locator: string): Promise<string> {
    const name = ownArtifactName(sessionId, locator);
    const content = await this.driver.run('single', (tx) => step(tx.artifactContent(sessionId, name)));
    if (content === undefined) throw artifactNotFound(locator);
    return content;
  }
}

function* putArtifact(tx: RelationalTx, input: ArtifactPut): Steps<ArtifactRef> {
  const row = yield* step(tx.sessionRow(input.sessionId));
  if (!row) throw notFound(input.sessionId);
  for (const name of uniqueArtifactNames(input.name)) {
    if (yield* step(tx.insertArtifact(row.key, name, input.content)))
      return { locator: artifactLocator(input.sessionId, name), bytes: Buffer.byteLength(input.content, 'utf8') };
  }
  throw new Error('unreachable: artifact name candidates are infinite');
}

/** Stores the bytes once per session: a second put of the same content finds its row and changes nothing. */
function* putMediaRow(tx: RelationalTx, input: MediaPut): Steps<StoredMedia> {
  const row = yield* step(tx.sessionRow(input.sessionId));
  if (!row) throw notFound(input.sessionId);
  const { name, media } = storedMediaOf(input);
  yield* step(tx.insertMedia(row.key, name, input.bytes));
  return media;
}
