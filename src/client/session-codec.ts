/**
 * What Temporal stores of a session is encrypted with the session's own data key (DESIGN §5.2,
 * §4.2): a payload codec that seals every payload of workflow `session/<id>` (start input,
 * signals, updates and their results, activity inputs and results, failure messages through
 * {@link SESSION_FAILURE_CONVERTER_PATH}) with AES-256-GCM under the key the store keeps for
 * `<id>`. Erasure destroys the key, so whatever Temporal still holds of the session (a closed
 * run before its retention expires, a copy in the server's database) can be read by no one.
 *
 * Payloads of anything else (no serialization context, another workflow) pass through
 * unchanged; so do payloads that were never sealed (histories recorded before this codec).
 *
 * Every turn writes four sealed payloads to the history (the update's argument and result, the
 * model step's input and result), so their framing counts (issue 50): a payload is sealed as
 * {@link SEALED_ENCODING} with short metadata names (`s` the session, `k` the key id), and its
 * plaintext starts with a flag byte saying whether the rest is the encoded payload as is or
 * compressed with deflate-raw (chosen when that is smaller). Payloads sealed in the first form
 * ({@link LEGACY_SEALED_ENCODING}: `session` and `key-id`, no flag, never compressed) still open,
 * so histories recorded before replay.
 */
import { createCipheriv, createDecipheriv, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { Payload, PayloadCodec, SerializationContext } from '@temporalio/common';
import proto from '@temporalio/proto';
import type { SessionKey, SessionKeyStore } from '../persistence/index.js';
import { SessionlogError, isSessionlogError } from '../session/index.js';
import { sessionIdOfWorkflow } from '../workflows/api.js';

const { temporal } = proto;

/** The `encoding` of a payload sealed by this codec (metadata `s` and `k`, a flag byte in the plaintext). */
export const SEALED_ENCODING = 'binary/sl-sealed';
/** The `encoding` of a payload sealed in the first form (metadata `session` and `key-id`, no flag byte); still opened. */
export const LEGACY_SEALED_ENCODING = 'binary/sessionlog-sealed';

/** The plaintext's first byte: the encoded payload follows as is… */
const PLAIN = 0;
/** …or compressed with deflate-raw. */
const DEFLATED = 1;
/** Encoded payloads shorter than this are sealed as they are (deflate gains nothing on them). */
const DEFLATE_FROM_BYTES = 96;

const IV_BYTES = 12;
const TAG_BYTES = 16;
/** How many sessions' keys a process keeps in memory. */
const KEY_CACHE_SIZE = 4096;
/** How long a key lookup waits for a store that cannot be reached before it fails (ms). */
const KEY_WAIT_MS = 10 * 60_000;

/**
 * The module the worker loads as its failure converter, in the workflow sandbox too
 * (converters/failure-converter.cjs at the package's root): failure messages and stack traces
 * travel as an encoded payload, so the codec seals them (an error message may quote what a user
 * sent). Found from this module's place whether it runs from the sources, the build or a bundle.
 */
export const SESSION_FAILURE_CONVERTER_PATH = join(packageRoot(), 'converters', 'failure-converter.cjs');

/** The nearest folder above this module whose package.json names sessionlog. */
function packageRoot(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (
      existsSync(manifest) &&
      (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === 'sessionlog'
    )
      return dir;
    if (dirname(dir) === dir) throw new Error('sessionlog: cannot find the package root (its package.json)');
  }
}

const encoder = new TextEncoder();

function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** The session a payload belongs to, from the workflow its serialization context names. */
export function sessionOfContext(context: SerializationContext | undefined): string | undefined {
  return sessionIdOfWorkflow(context?.workflowId);
}

/** Seals and opens the payloads of session workflows with their sessions' keys. */
export class SessionPayloadCodec implements PayloadCodec {
  /** Keys (or the pending lookup of one) by session id, least recently used first. */
  private readonly keys = new Map<string, Promise<SessionKey | undefined>>();

  constructor(private readonly store: SessionKeyStore) {}

  async encode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    const sessionId = sessionOfContext(context);
    if (sessionId === undefined || payloads.length === 0) return payloads;
    const key = await this.key(sessionId, true);
    return payloads.map((payload) => seal(payload, sessionId, key!));
  }

  async decode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    return Promise.all(
      payloads.map(async (payload) => {
        const encoding = metadataText(payload, 'encoding');
        const legacy = encoding === LEGACY_SEALED_ENCODING;
        if (!legacy && encoding !== SEALED_ENCODING) return payload;
        const sessionId = metadataText(payload, legacy ? 'session' : 's') ?? sessionOfContext(context);
        const keyId = metadataText(payload, legacy ? 'key-id' : 'k');
        if (sessionId === undefined || keyId === undefined)
          throw new SessionlogError('CORRUPT_LOG', 'a sealed Temporal payload names no session or key');
        let key = await this.key(sessionId, false);
        // A key made after this process cached another (the session was erased and created again).
        if (key?.id !== keyId) {
          this.keys.delete(sessionId);
          key = await this.key(sessionId, false);
        }
        if (key?.id !== keyId) {
          throw new SessionlogError(
            'SESSION_ERASED',
            `session ${sessionId}'s data key ${keyId} is gone (the session was erased); what Temporal holds of it cannot be read`,
          );
        }
        return open(payload, sessionId, key, legacy);
      }),
    );
  }

  /**
   * The session's key from the store, waiting out a store that cannot be reached (UNAVAILABLE)
   * for up to {@link KEY_WAIT_MS}: a codec that failed would fail the task it serves, and a
   * worker whose codec fails while it reports an activity's failure stops altogether.
   */
  private async lookUp(sessionId: string, obtain: boolean): Promise<SessionKey | undefined> {
    // A stored key is read; only a missing one is made, in a (durable) write transaction: most
    // encodes that miss the cache are of sessions evicted from it, whose keys exist.
    const found = await this.retrying(() => this.store.find(sessionId));
    return found !== undefined || !obtain ? found : this.retrying(() => this.store.obtain(sessionId));
  }

  private async retrying<T>(call: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + KEY_WAIT_MS;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
      try {
        return await call();
      } catch (error) {
        if (!isSessionlogError(error) || error.code !== 'UNAVAILABLE' || Date.now() + delay > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** Forgets the cached key of `sessionId` (after this process erased it). */
  forget(sessionId: string): void {
    this.keys.delete(sessionId);
  }

  private async key(sessionId: string, obtain: boolean): Promise<SessionKey | undefined> {
    let pending = this.keys.get(sessionId);
    if (pending) {
      // Most recently used last.
      this.keys.delete(sessionId);
      this.keys.set(sessionId, pending);
    } else {
      pending = this.lookUp(sessionId, obtain);
      this.keys.set(sessionId, pending);
      while (this.keys.size > KEY_CACHE_SIZE) this.keys.delete(this.keys.keys().next().value as string);
    }
    try {
      const key = await pending;
      // A miss is not cached: the key may be made by the next encode.
      if (key === undefined) {
        if (this.keys.get(sessionId) === pending) this.keys.delete(sessionId);
        // An encode that found a decode's lookup under way, which found no key: make it now.
        if (obtain) return await this.lookUp(sessionId, true);
      }
      return key;
    } catch (error) {
      if (this.keys.get(sessionId) === pending) this.keys.delete(sessionId);
      throw error;
    }
  }
}

/**
 * Random IVs are drawn a block at a time: one `randomBytes` call per {@link IV_BLOCK} seals
 * instead of one per seal (which was most of a seal's CPU). Each IV is still 96 random bits used
 * once; a block is never reused, and each thread (isolate) draws its own.
 */
const IV_BLOCK = 1024;
let ivBlock = Buffer.alloc(0);
let ivNext = 0;

function nextIv(): Buffer {
  if (ivNext + IV_BYTES > ivBlock.length) {
    ivBlock = randomBytes(IV_BYTES * IV_BLOCK);
    ivNext = 0;
  }
  ivNext += IV_BYTES;
  return ivBlock.subarray(ivNext - IV_BYTES, ivNext);
}

/** Each session key as a KeyObject, made once (a raw key is imported again by every cipher). */
const keyObjects = new WeakMap<SessionKey, KeyObject>();

function keyObject(key: SessionKey): KeyObject {
  let object = keyObjects.get(key);
  if (!object) {
    object = createSecretKey(key.key);
    keyObjects.set(key, object);
  }
  return object;
}

function metadataText(payload: Payload, name: string): string | undefined {
  const value = payload.metadata?.[name];
  return value ? Buffer.from(value).toString('utf8') : undefined;
}

/**
 * The session id is the additional data: a payload sealed for one session does not open as
 * another's. The flag byte is sealed with the rest, so it cannot be changed either.
 */
function seal(payload: Payload, sessionId: string, key: SessionKey): Payload {
  const iv = nextIv();
  const cipher = createCipheriv('aes-256-gcm', keyObject(key), iv);
  cipher.setAAD(utf8(sessionId));
  const encoded = temporal.api.common.v1.Payload.encode(payload).finish();
  const deflated = encoded.length >= DEFLATE_FROM_BYTES ? deflateRawSync(encoded) : undefined;
  const [flag, body] = deflated && deflated.length < encoded.length ? [DEFLATED, deflated] : [PLAIN, encoded];
  const sealed = Buffer.concat([
    iv,
    cipher.update(Uint8Array.of(flag)),
    cipher.update(body),
    cipher.final(),
    cipher.getAuthTag(),
  ]);
  return { metadata: { encoding: utf8(SEALED_ENCODING), s: utf8(sessionId), k: utf8(key.id) }, data: sealed };
}

function open(payload: Payload, sessionId: string, key: SessionKey, legacy: boolean): Payload {
  const data = Buffer.from(payload.data ?? new Uint8Array());
  if (data.length < IV_BYTES + TAG_BYTES)
    throw new SessionlogError('CORRUPT_LOG', `a sealed Temporal payload of session ${sessionId} is truncated`);
  const decipher = createDecipheriv('aes-256-gcm', keyObject(key), data.subarray(0, IV_BYTES));
  decipher.setAAD(utf8(sessionId));
  decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
  let plain: Buffer;
  try {
    plain = Buffer.concat([decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), decipher.final()]);
  } catch {
    throw new SessionlogError(
      'CORRUPT_LOG',
      `a sealed Temporal payload of session ${sessionId} does not open with its key (damaged or altered)`,
    );
  }
  if (legacy) return temporal.api.common.v1.Payload.decode(plain);
  if (plain[0] === PLAIN) return temporal.api.common.v1.Payload.decode(plain.subarray(1));
  if (plain[0] === DEFLATED) return temporal.api.common.v1.Payload.decode(inflateRawSync(plain.subarray(1)));
  throw new SessionlogError(
    'CORRUPT_LOG',
    `a sealed Temporal payload of session ${sessionId} has an unknown form (${plain[0] ?? 'empty'})`,
  );
}
