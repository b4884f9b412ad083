/**
 * Artifact store (DESIGN §4): full tool output and spilled text, addressed by an opaque
 * locator, namespaced per session. Reads name the session asking, and a session reads only its
 * own artifacts (issue 9): a locator of another session is ARTIFACT_FOREIGN on every backend.
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
  /**
   * Stores `content` under a sanitized, unique name (a second put with the same suggested name
   * gets a new locator). SESSION_NOT_FOUND unless the session exists. Owner-only where it is a file.
   */
  put(input: ArtifactPut): Promise<ArtifactRef>;
  /**
   * The whole content of an artifact of session `sessionId`. ARTIFACT_FOREIGN for a locator of
   * another session; ARTIFACT_NOT_FOUND for an unknown locator or one not of the form
   * `artifact:<sessionId>/<name>`.
   */
  get(sessionId: string, locator: string): Promise<string>;
  /** A window of the content, `offset` and `limit` in UTF-16 code units; same refusals as {@link get}. */
  read(sessionId: string, locator: string, offset: number, limit: number): Promise<{ text: string; total: number }>;
}
