/** The JSONL backend's artifact store: a file per artifact in the session's `artifacts` directory. */
import { mkdir, open, readFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import {
  assertArtifactPut,
  artifactLocator,
  artifactNotFound,
  artifactWindow,
  ownArtifactName,
  uniqueArtifactNames,
  type ArtifactPut,
  type ArtifactRef,
} from '../artifacts.js';
import { isErrno, fsyncDir } from './files.js';
import { ARTIFACT_DIR } from './layout.js';
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
}
