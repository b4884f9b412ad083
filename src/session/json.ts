/**
 * Lossless-JSON validation (dsh-spec §1.3): a payload is accepted only if it round-trips
 * through JSON exactly. The check also detaches the value (each property is read once), so a
 * getter cannot show validation one value and storage another.
 */

export type JsonPrimitive = null | boolean | number | string;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** Thrown when a value cannot round-trip through JSON. `path` names the offending location. */
export class NonJsonValueError extends TypeError {
  readonly code = 'NON_JSON_VALUE';
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super(`value at ${path} is not lossless JSON: ${reason}`);
    this.name = 'NonJsonValueError';
  }
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto === null) return true;
  // Plain objects from any realm: their prototype is that realm's Object.prototype.
  const protoOfProto = Object.getPrototypeOf(proto) as unknown;
  if (protoOfProto !== null) return false;
  const ctor = (proto as { constructor?: unknown }).constructor;
  return typeof ctor === 'function' && ctor.name === 'Object';
}

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'bigint') return 'a BigInt';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  return (value as object)?.constructor?.name ?? typeof value;
}

/** A node of the descent path, kept only to name the location in an error. */
type PathNode = { parent: PathNode | undefined; key: string | number };

function pathOf(root: string, node: PathNode | undefined, key?: string | number): string {
  const keys: Array<string | number> = key === undefined ? [] : [key];
  for (let n = node; n; n = n.parent) keys.push(n.key);
  let path = root;
  for (let i = keys.length - 1; i >= 0; i--) {
    const k = keys[i]!;
    path += typeof k === 'number' ? `[${k}]` : `.${k}`;
  }
  return path;
}

const EXIT = Symbol('exit');

/**
 * Validates `value` as lossless JSON and returns a detached deep copy. Iterative (no
 * recursion-depth limit), with no per-node allocation beyond the copy itself; the path of the
 * offending value is built only when throwing {@link NonJsonValueError}.
 */
export function toLosslessJson(value: unknown, rootPath = '$'): JsonValue {
  // Objects on the current descent path: a value met again while still open is a cycle. A
  // shared but acyclic sub-object is fine (JSON duplicates it).
  const open = new Set<object>();
  // Parallel stacks: the value to copy, the container and key to store the copy at, and the
  // path node of that container (for error messages).
  const values: unknown[] = [value];
  const targets: Array<JsonValue[] | JsonObject | undefined> = [undefined];
  const keys: Array<string | number> = [0];
  const paths: Array<PathNode | undefined> = [undefined];
  let result: JsonValue = null;
  const fail = (path: PathNode | undefined, key: string | number | undefined, reason: string): never => {
    throw new NonJsonValueError(pathOf(rootPath, path, key), reason);
  };
  while (values.length > 0) {
    const source = values.pop();
    const target = targets.pop();
    const key = keys.pop()!;
    const parentPath = paths.pop();
    if (source === EXIT) {
      open.delete(target as unknown as object);
      continue;
    }
    const here = target === undefined ? undefined : key;
    let copy: JsonValue;
    if (source === null || typeof source === 'boolean' || typeof source === 'string') {
      copy = source;
    } else if (typeof source === 'number') {
      if (!Number.isFinite(source) || Object.is(source, -0)) fail(parentPath, here, describe(source));
      copy = source;
    } else if (typeof source !== 'object') {
      return fail(parentPath, here, describe(source));
    } else {
      if (open.has(source)) fail(parentPath, here, 'a cycle');
      const node: PathNode | undefined = here === undefined ? parentPath : { parent: parentPath, key: here };
      open.add(source);
      values.push(EXIT);
      targets.push(source as unknown as JsonObject);
      keys.push(0);
      paths.push(undefined);
      if (Array.isArray(source)) {
        const length = source.length;
        if (Reflect.ownKeys(source).length !== length + 1)
          fail(parentPath, here, 'a sparse array or an array with extra properties');
        const array: JsonValue[] = new Array<JsonValue>(length);
        for (let i = length - 1; i >= 0; i--) {
          if (!Object.prototype.hasOwnProperty.call(source, i)) fail(parentPath, here, 'a sparse array');
          values.push(source[i] as unknown);
          targets.push(array);
          keys.push(i);
          paths.push(node);
        }
        copy = array;
      } else {
        if (!isPlainObject(source)) fail(parentPath, here, describe(source));
        const object: JsonObject = {};
        const ownKeys = Reflect.ownKeys(source);
        for (let i = ownKeys.length - 1; i >= 0; i--) {
          const k = ownKeys[i]!;
          if (typeof k === 'symbol') return fail(parentPath, here, 'a symbol key');
          const desc = Object.getOwnPropertyDescriptor(source, k)!;
          if (!desc.enumerable) fail(node, k, 'a non-enumerable property');
          // Each property is read once: a getter cannot show validation one value and storage another.
          const item: unknown = 'value' in desc ? desc.value : (source as Record<string, unknown>)[k];
          if (item === undefined) fail(node, k, 'undefined');
          values.push(item);
          targets.push(object);
          keys.push(k);
          paths.push(node);
        }
        copy = object;
      }
    }
    if (target === undefined) result = copy;
    else if (Array.isArray(target)) target[key as number] = copy;
    // defineProperty keeps a "__proto__" key as an own data property.
    else if (key === '__proto__')
      Object.defineProperty(target, key, { value: copy, enumerable: true, writable: true, configurable: true });
    else target[key as string] = copy;
  }
  return result;
}

/** Deep-freezes a JSON value in place and returns it. */
export function deepFreeze<T>(value: T): T {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (item === null || typeof item !== 'object' || Object.isFrozen(item)) continue;
    Object.freeze(item);
    for (const key of Object.keys(item)) stack.push((item as Record<string, unknown>)[key]);
  }
  return value;
}

/** Why the fast copy below handed a value to {@link toLosslessJson}. */
const NOT_PLAIN = Symbol('not plain');
/** Deeper than this, the fast copy hands over (a cycle also ends up here). */
const FAST_COPY_DEPTH = 64;

/**
 * {@link toLosslessJson} and {@link deepFreeze} in one pass, for the append path: plain objects,
 * dense arrays and finite numbers are copied and frozen as they are read, and anything else (a
 * class instance, an array from another realm, a symbol or non-enumerable key, a `__proto__`
 * key, undefined, -0, deep nesting, a cycle) sends the whole value through {@link toLosslessJson},
 * whose answer and error are then the ones given. Each property is read once when the fast copy
 * succeeds (a getter too), as in {@link toLosslessJson}.
 */
export function toFrozenLosslessJson(value: unknown, rootPath = '$'): JsonValue {
  try {
    return fastFrozenCopy(value, 0);
  } catch (error) {
    if (error !== NOT_PLAIN) throw error;
    return deepFreeze(toLosslessJson(value, rootPath));
  }
}

/**
 * Whether `source` has exactly `count` own string keys and no symbol key: with `count` its
 * enumerable keys (an array's indices and `length`), no property is non-enumerable or
 * symbol-keyed. The same verdict as counting `Reflect.ownKeys`, about a third cheaper in V8.
 */
function onlyTheseKeys(source: object, count: number): boolean {
  return Object.getOwnPropertyNames(source).length === count && Object.getOwnPropertySymbols(source).length === 0;
}

function fastFrozenCopy(source: unknown, depth: number): JsonValue {
  if (source === null || typeof source === 'string' || typeof source === 'boolean') return source;
  if (typeof source === 'number') {
    if (!Number.isFinite(source) || Object.is(source, -0)) throw NOT_PLAIN;
    return source;
  }
  if (typeof source !== 'object' || depth >= FAST_COPY_DEPTH) throw NOT_PLAIN;
  if (Array.isArray(source)) {
    const length = source.length;
    if (Object.getPrototypeOf(source) !== Array.prototype || !onlyTheseKeys(source, length + 1)) throw NOT_PLAIN;
    const array: JsonValue[] = new Array<JsonValue>(length);
    for (let i = 0; i < length; i++) array[i] = fastFrozenCopy(source[i], depth + 1);
    return Object.freeze(array) as JsonValue[];
  }
  const proto = Object.getPrototypeOf(source) as unknown;
  if (proto !== Object.prototype && proto !== null) throw NOT_PLAIN;
  const keys = Object.keys(source);
  if (!onlyTheseKeys(source, keys.length)) throw NOT_PLAIN;
  const object: JsonObject = {};
  for (const key of keys) {
    if (key === '__proto__') throw NOT_PLAIN;
    const item = (source as Record<string, unknown>)[key];
    if (item === undefined) throw NOT_PLAIN;
    object[key] = fastFrozenCopy(item, depth + 1);
  }
  return Object.freeze(object);
}
