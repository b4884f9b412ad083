// The inspector's only way to the gateway: documented /v1 routes, same origin, with the bearer
// token the user gave (kept in sessionStorage, so it ends with the tab), and the live tail over
// an EventSource opened with a short-lived stream token (EventSource cannot send headers).

const TOKEN_KEY = 'sessionlog.token';

/** 'bearer' when the gateway wants a token, 'none' otherwise (set by the gateway in index.html). */
export const authMode =
  document.querySelector('meta[name="sessionlog-auth"]')?.getAttribute('content') === 'bearer' ? 'bearer' : 'none';

export function storedToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function storeToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** An error answer of the gateway: `{error: {code, message}}` with its status. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Fired on window when the gateway refuses the token, so the app can ask for it again. */
export const UNAUTHORIZED_EVENT = 'sessionlog:unauthorized';

/** A JSON request to the gateway; resolves to the parsed body, rejects with ApiError. */
export async function api(path, { method = 'GET', body } = {}) {
  const headers = { accept: 'application/json' };
  const token = storedToken();
  if (token) headers.authorization = `Bearer ${token}`;
  const init = { method, headers };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, 'UNREACHABLE', `the gateway did not answer (${error.message})`);
  }
  let payload = null;
  if ((response.headers.get('content-type') ?? '').includes('application/json')) payload = await response.json();
  if (!response.ok) {
    const error = new ApiError(
      response.status,
      payload?.error?.code ?? `HTTP_${response.status}`,
      payload?.error?.message ?? response.statusText,
    );
    if (response.status === 401) window.dispatchEvent(new CustomEvent(UNAUTHORIZED_EVENT, { detail: error.message }));
    throw error;
  }
  return payload;
}

export const sessionPath = (id) => `/v1/sessions/${encodeURIComponent(id)}`;

let documentedPaths;

/**
 * The paths the gateway documents in its OpenAPI document, so the page asks only for routes
 * that exist (a route added later, such as /context, lights its panel up without a 404).
 */
export async function documentedRoutes() {
  documentedPaths ??= api('/v1/openapi.json').then((doc) => new Set(Object.keys(doc.paths ?? {})));
  try {
    return await documentedPaths;
  } catch (error) {
    documentedPaths = undefined;
    throw error;
  }
}

/**
 * Every event type this gateway's build knows (src/session/events.ts, written into index.html by
 * the gateway): an EventSource only delivers the named events it listens to.
 */
const EVENT_TYPES = (document.querySelector('meta[name="sessionlog-event-types"]')?.getAttribute('content') ?? '')
  .split(' ')
  .filter((type) => type.length > 0);

const RECONNECT_MS = 1000;

/**
 * Follows a session's log from `fromSeq`: calls `onEvent(event)` for each event in seq order and
 * `onState('live' | 'connecting' | 'reconnecting' | 'error', detail)`. A dropped stream is
 * reopened after the last event received, with a fresh stream token; events the stream skipped
 * are read back over the JSON route. Returns `{close()}`.
 */
export function followEvents(sessionId, fromSeq, { onEvent, onState }) {
  let next = fromSeq;
  let source;
  let timer;
  let closed = false;
  // Events are taken one at a time, in arrival order, so a gap being read back cannot be overtaken.
  let taken = Promise.resolve();

  const take = (event) => {
    if (closed || event.seq !== next) return;
    next = event.seq + 1;
    onEvent(event);
  };

  /**
   * An event past `next` means the stream carried events this page did not hear (a type no
   * listener names: one a newer writer marked ignorable). Those are read back over the JSON
   * route, so the log stays gap-free instead of stopping at the first one.
   */
  const readGap = async (upTo) => {
    const query = new URLSearchParams({ from: String(next), limit: String(upTo - next) });
    const missed = await api(`${sessionPath(sessionId)}/events?${query}`);
    for (const event of missed.events) take(event);
  };

  const reconnect = (detail) => {
    source?.close();
    if (closed) return;
    onState('reconnecting', detail);
    clearTimeout(timer);
    timer = setTimeout(open, RECONNECT_MS);
  };

  const open = async () => {
    onState('connecting');
    let minted;
    try {
      minted = await api(`${sessionPath(sessionId)}/stream-token`, { method: 'POST' });
    } catch (error) {
      if (closed) return;
      onState('error', error.message);
      if (error.status !== 401) timer = setTimeout(open, RECONNECT_MS * 3);
      return;
    }
    if (closed) return;
    const query = new URLSearchParams({ from: String(next), streamToken: minted.token });
    const opened = new EventSource(`${sessionPath(sessionId)}/events?${query}`);
    source = opened;
    opened.onopen = () => onState('live');
    const deliver = (message) => {
      const event = JSON.parse(message.data);
      taken = taken.then(async () => {
        // After a reconnect the gateway may resend what we hold.
        if (closed || source !== opened || event.seq < next) return;
        if (event.seq > next) {
          try {
            await readGap(event.seq);
          } catch (error) {
            // The stream, reopened from the first event still missing, sends the gap again.
            if (source === opened) reconnect(error.message);
            return;
          }
        }
        take(event);
      });
    };
    for (const type of EVENT_TYPES) opened.addEventListener(type, deliver);
    opened.onmessage = deliver;
    opened.addEventListener('error', (message) => {
      // Our own reconnect (with a fresh token) replaces EventSource's, whose token may have expired.
      if (source === opened) reconnect(message.data ? JSON.parse(message.data).error?.message : undefined);
    });
  };
  void open();
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      source?.close();
    },
  };
}
