/**
 * Artifact store (DESIGN §4): full tool output and spilled text, addressed by an opaque
 * locator, namespaced per session.
 */
export type ArtifactRef = {
  /** Opaque locator: `artifact:<sessionId>/<name>`; only the store that issued it can read it. */
  locator: string;
  /** UTF-8 byte length of the content. */
  bytes: number;
};

export type ArtifactPut = {
  sessionId: string;
  /** A suggested name, e.g. `<tool>-<callId>.txt`; the store makes it unique and safe. */
  name: string;
  content: string;
};

export interface ArtifactStore {
  put(input: ArtifactPut): Promise<ArtifactRef>;
  /** The whole content, or ARTIFACT_NOT_FOUND. */
  get(locator: string): Promise<string>;
  /** A code-point window of the content: `offset` and `limit` in characters (UTF-16 units). */
  read(locator: string, offset: number, limit: number): Promise<{ text: string; total: number }>;
}
