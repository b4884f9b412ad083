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

/**
 * Validates `value` as lossless JSON and returns a detached deep copy. Iterative (no
 * recursion-depth limit). Throws {@link NonJsonValueError} naming the first bad path.
 */
export function toLosslessJson(value: unknown, rootPath = '$'): JsonValue {
  // Objects on the current descent path: a value met again while still open is a cycle. A
  // shared but acyclic sub-object is fine (JSON duplicates it).
  const open = new Set<object>();
  type Frame =
    | { kind: 'enter'; source: unknown; path: string; assign: (v: JsonValue) => void }
    | { kind: 'exit'; source: object };
  let result: JsonValue = null;
  const stack: Frame[] = [{ kind: 'enter', source: value, path: rootPath, assign: (v) => (result = v) }];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    if (frame.kind === 'exit') {
      open.delete(frame.source);
      continue;
    }
    const { source, path } = frame;
    if (source === null || typeof source === 'boolean' || typeof source === 'string') {
      frame.assign(source);
      continue;
    }
    if (typeof source === 'number') {
      if (!Number.isFinite(source) || Object.is(source, -0)) throw new NonJsonValueError(path, describe(source));
      frame.assign(source);
      continue;
    }
    if (typeof source !== 'object') throw new NonJsonValueError(path, describe(source));
    if (open.has(source)) throw new NonJsonValueError(path, 'a cycle');
    open.add(source);
    stack.push({ kind: 'exit', source });
    if (Array.isArray(source)) {
      if (Reflect.ownKeys(source).length !== source.length + 1) {
        throw new NonJsonValueError(path, 'a sparse array or an array with extra properties');
      }
      const copy: JsonValue[] = new Array<JsonValue>(source.length);
      frame.assign(copy);
      for (let i = source.length - 1; i >= 0; i--) {
        if (!Object.prototype.hasOwnProperty.call(source, i)) throw new NonJsonValueError(path, 'a sparse array');
        stack.push({ kind: 'enter', source: source[i] as unknown, path: `${path}[${i}]`, assign: (v) => (copy[i] = v) });
      }
      continue;
    }
    if (!isPlainObject(source)) throw new NonJsonValueError(path, describe(source));
    const entries: Array<[string, unknown]> = [];
    for (const key of Reflect.ownKeys(source)) {
      if (typeof key === 'symbol') throw new NonJsonValueError(path, 'a symbol key');
      const desc = Object.getOwnPropertyDescriptor(source, key)!;
      if (!desc.enumerable) throw new NonJsonValueError(`${path}.${key}`, 'a non-enumerable property');
      const item: unknown = 'value' in desc ? desc.value : (source as Record<string, unknown>)[key];
      if (item === undefined) throw new NonJsonValueError(`${path}.${key}`, 'undefined');
      entries.push([key, item]);
    }
    const copy: JsonObject = {};
    frame.assign(copy);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, item] = entries[i]!;
      stack.push({
        kind: 'enter',
        source: item,
        path: `${path}.${key}`,
        // defineProperty keeps a "__proto__" key as an own data property.
        assign: (v) => Object.defineProperty(copy, key, { value: v, enumerable: true, writable: true, configurable: true }),
      });
    }
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
