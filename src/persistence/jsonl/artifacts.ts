/**
 * The JSONL backend's artifact store: a file per artifact in the session's `artifacts` directory,
 * and a file per distinct medium in its `media` directory (`media-<sha256>.<ext>`, the bytes as
 * sent, published once: written to a temp file, fsynced and linked into place, so a crash never
 * leaves a partial file under the content's name).
 */
import { mkdir, open, readFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import {
  assertArtifactPut,
  artifactLocator,
  artifactNotFound,
  artifactWindow,
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
import { isErrno, fsyncDir, ensureDir, publishOnce } from './files.js';
import { ARTIFACT_DIR, MEDIA_DIR } from './layout.js';
import type { JsonlSessionStore } from './store.js';
import type { ArtifactStore } from '../store.js';

export class JsonlArtifacts implements ArtifactStore {
  constructor(private readonly store: JsonlSessionStore) {}

  async put(input: ArtifactPut): Promise<ArtifactRef> {
    this.store.assertOpen();
    assertArtifactPut(input);
    await this.store.requireSession(input.sessionId);
    const dir = join(this.store.layout.sessionDir(input.sessionId), ARTIFACT_DIR);
    try {
      await mkdir(dir, { mode: 0o700 });
      await fsyncDir(this.store.layout.sessionDir(input.sessionId));
    } catch (error) {
      if (!isErrno(error, 'EEXIST')) throw error;
    }
    for (const name of uniqueArtifactNames(input.name)) {
      let handle: FileHandle;
      try {
        handle = await open(join(dir, name), 'wx', 0o600);
      } catch (error) {
        if (isErrno(error, 'EEXIST')) continue;
        throw error;
      }
      try {
        await handle.writeFile(input.content, 'utf8');
        await handle.sync();
      } finally {
        await handle.close();
      }
      await fsyncDir(dir);
      return { locator: artifactLocator(input.sessionId, name), bytes: Buffer.byteLength(input.content, 'utf8') };
    }
    throw new Error('unreachable: artifact name candidates are infinite');
  }

  async get(sessionId: string, locator: string): Promise<string> {
    this.store.assertOpen();
    const name = ownArtifactName(sessionId, locator);
    try {
      return await readFile(join(this.store.layout.sessionDir(sessionId), ARTIFACT_DIR, name), 'utf8');
    } catch (error) {
      if (isErrno(error, 'ENOENT')) throw artifactNotFound(locator);
      throw error;
    }
  }

  async read(
    sessionId: string,
    locator: string,
    offset: number,
    limit: number,
  ): Promise<{ text: string; total: number }> {
    return artifactWindow(await this.get(sessionId, locator), offset, limit);
  }

  async putMedia(input: MediaPut): Promise<StoredMedia> {
    this.store.assertOpen();
    assertMediaPut(input);
    await this.store.requireSession(input.sessionId);
    const { name, media } = storedMediaOf(input);
    const sessionDir = this.store.layout.sessionDir(input.sessionId);
    const dir = join(sessionDir, MEDIA_DIR);
    await ensureDir(dir, sessionDir);
    // False when the same content is there already: stored once.
    await publishOnce(join(dir, name), dir, input.bytes);
    return media;
  }

  async readMedia(sessionId: string, locator: string): Promise<Uint8Array> {
    this.store.assertOpen();
    const name = ownMediaName(sessionId, locator);
    try {
      return new Uint8Array(await readFile(join(this.store.layout.sessionDir(sessionId), MEDIA_DIR, name)));
    } catch (error) {
      if (isErrno(error, 'ENOENT')) throw artifactNotFound(locator);
      throw error;
    }
  }
}
