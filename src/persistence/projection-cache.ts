/**
 * Projection cache storage (dsh-spec §9.3). A record binds checkpoint rows to the session's
 * identity (`createdAt`) so a record from a deleted-and-recreated session is never used. The
 * cache may lag the log but never leads it; a broken record reads as absent.
 */
import { z } from 'zod';
import { SessionlogError, toLosslessJson, type ProjectionRows } from '../session/index.js';
import { prefixAnchorSchema, type PrefixAnchor } from './anchor.js';

/**
 * `anchor` (anchor.ts), when present, seals the stored log through the rows' seq, so a cold read
 * can verify that prefix by hashing it instead of parsing it.
 */
export type ProjectionCacheRecord = { identity: { createdAt: number }; rows: ProjectionRows; anchor?: PrefixAnchor };

const recordSchema = z
  .object({
    identity: z.object({ createdAt: z.number().int().nonnegative() }).strict(),
    rows: z.record(
      z.string(),
      z.object({ ver: z.number().int(), seq: z.number().int().min(-1), val: z.json() }).strict(),
    ),
    anchor: prefixAnchorSchema.optional(),
  })
  .strict();

/** Parses stored record text; undefined for anything that is not a well-formed record. */
export function parseProjectionCacheRecord(text: string): ProjectionCacheRecord | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    // Unparsable cache text: the cache is advisory, so it reads as absent and is rewritten.
    return undefined;
  }
  const parsed = recordSchema.safeParse(raw);
  return parsed.success ? (parsed.data as ProjectionCacheRecord) : undefined;
}

/** Serializes a record; a state that is not lossless JSON fails loudly (INVALID_ARGUMENT). */
export function serializeProjectionCacheRecord(record: ProjectionCacheRecord): string {
  let json: unknown;
  try {
    json = toLosslessJson(record, 'projectionCache');
  } catch (error) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `projection cache record is not lossless JSON: ${(error as Error).message}`,
      { cause: error },
    );
  }
  const parsed = recordSchema.safeParse(json);
  if (!parsed.success) {
    throw new SessionlogError(
      'INVALID_ARGUMENT',
      `projection cache record is malformed: ${parsed.error.issues[0]?.message ?? 'invalid'}`,
    );
  }
  return JSON.stringify(json);
}
