/**
 * Hostile and malformed requests: each gets a 4xx JSON error of the `{error: {code, message}}`
 * shape with the status the error table gives its code, whether fastify, a route or Node's HTTP
 * parser refused it (raw bytes over a socket); afterwards the server still answers, no
 * session's log changed and the gateway logged nothing at warn or error. Also the bearer-token
 * rules.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import {
  createGateway,
  ERROR_STATUS,
  startGateway,
  type ErrorCode,
  type RunningGateway,
} from '../../src/gateway/index.js';
import { ALL_TENANTS } from '../../src/persistence/index.js';
import type { StoredEvent } from '../../src/session/index.js';
import { startStack, type Stack } from '../support/stack.js';
import { captureLogger, expectErrorShape, expectRawErrorShape, rawExchange, request, type LogEntry } from './http.js';

const BODY_LIMIT = 16 * 1024;
const MAX_MESSAGE_BYTES = 1000;
const TOKEN = 'test-token-0123456789abcdef';

let stack: Stack;
let gateway: RunningGateway;
let guarded: RunningGateway;
let logs: LogEntry[];
const sessionA = `mal-a-${Date.now()}`;
const sessionB = `mal-b-${Date.now()}`;

beforeAll(async () => {
  stack = await startStack({ tunables: { maxMessageBytes: MAX_MESSAGE_BYTES } });
  const options = { client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: BODY_LIMIT };
  const captured = captureLogger();
  logs = captured.entries;
  gateway = await startGateway({ ...options, logger: captured.logger });
  guarded = await startGateway({ ...options, token: TOKEN });
  for (const id of [sessionA, sessionB]) {
    expect((await request(gateway.url, 'POST', '/v1/sessions', { json: { id } })).status).toBe(201);
    expect(
      (await request(gateway.url, 'POST', `/v1/sessions/${id}/messages?wait=true`, { json: { text: `hello ${id}` } }))
        .status,
    ).toBe(200);
  }
});
afterAll(async () => {
  await guarded?.close();
  await gateway?.close();
  await stack?.close();
});

async function snapshotLogs(): Promise<Map<string, StoredEvent[]>> {
  const logs = new Map<string, StoredEvent[]>();
  for (const header of await stack.store.list(ALL_TENANTS))
    logs.set(header.id, await stack.store.readFrom(header.id, 0));
  return logs;
}

type Case = {
  name: string;
  method: string;
  path: string;
  json?: unknown;
  body?: string;
  headers?: Record<string, string>;
  status: number;
  code: ErrorCode;
};

const json = { 'content-type': 'application/json' };
const A = () => `/v1/sessions/${sessionA}`;

const CASES: Case[] = [
  // Bodies: syntax, shape, types.
  {
    name: 'truncated JSON',
    method: 'POST',
    path: '/v1/sessions',
    body: '{"id": "x"',
    headers: json,
    status: 400,
    code: 'INVALID_JSON',
  },
  {
    name: 'JSON with __proto__',
    method: 'POST',
    path: '/v1/sessions',
    body: '{"__proto__": {"admin": true}}',
    headers: json,
    status: 400,
    code: 'INVALID_JSON',
  },
  { name: 'array body', method: 'POST', path: '/v1/sessions', json: [], status: 400, code: 'INVALID_REQUEST' },
  { name: 'numeric id', method: 'POST', path: '/v1/sessions', json: { id: 5 }, status: 400, code: 'INVALID_REQUEST' },
  {
    name: 'traversal id in body',
    method: 'POST',
    path: '/v1/sessions',
    json: { id: '../etc' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'dot id in body',
    method: 'POST',
    path: '/v1/sessions',
    json: { id: '.hidden' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'agent model of the wrong type',
    method: 'POST',
    path: '/v1/sessions',
    json: { agent: { model: 1 } },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'unknown body field',
    method: 'POST',
    path: '/v1/sessions',
    json: { extra: true },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'existing session id',
    method: 'POST',
    path: '/v1/sessions',
    json: { id: sessionA },
    status: 409,
    code: 'SESSION_ALREADY_EXISTS',
  },
  {
    name: 'text/plain body',
    method: 'POST',
    path: '/v1/sessions',
    body: 'id=x',
    headers: { 'content-type': 'text/plain' },
    status: 415,
    code: 'UNSUPPORTED_MEDIA_TYPE',
  },
  {
    name: 'form body',
    method: 'POST',
    path: `${A()}/messages`,
    body: 'text=hi',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    status: 415,
    code: 'UNSUPPORTED_MEDIA_TYPE',
  },
  {
    name: 'body over the limit',
    method: 'POST',
    path: '/v1/sessions',
    json: { agent: { system: 'x'.repeat(BODY_LIMIT) } },
    status: 413,
    code: 'BODY_TOO_LARGE',
  },
  {
    name: 'message body over the limit',
    method: 'POST',
    path: `${A()}/messages`,
    json: { text: 'y'.repeat(BODY_LIMIT * 2) },
    status: 413,
    code: 'BODY_TOO_LARGE',
  },
  {
    name: 'message text of the wrong type',
    method: 'POST',
    path: `${A()}/messages`,
    json: { text: 5 },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'message without text',
    method: 'POST',
    path: `${A()}/messages`,
    json: {},
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'null message body',
    method: 'POST',
    path: `${A()}/messages`,
    body: 'null',
    headers: json,
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'message with no body at all',
    method: 'POST',
    path: `${A()}/messages`,
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'blank message',
    method: 'POST',
    path: `${A()}/messages`,
    json: { text: '   \n ' },
    status: 422,
    code: 'EMPTY_MESSAGE',
  },
  {
    name: 'blank message awaited',
    method: 'POST',
    path: `${A()}/messages?wait=true`,
    json: { text: '' },
    status: 422,
    code: 'EMPTY_MESSAGE',
  },
  {
    name: 'message over maxMessageBytes',
    method: 'POST',
    path: `${A()}/messages`,
    json: { text: 'é'.repeat(MAX_MESSAGE_BYTES) },
    status: 422,
    code: 'MESSAGE_TOO_LARGE',
  },
  {
    name: 'empty message id',
    method: 'POST',
    path: `${A()}/messages`,
    json: { text: 'hi', id: '' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'wait=yes',
    method: 'POST',
    path: `${A()}/messages?wait=yes`,
    json: { text: 'hi' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'message to an unknown session',
    method: 'POST',
    path: '/v1/sessions/no-such-session/messages',
    json: { text: 'hi' },
    status: 404,
    code: 'SESSION_NOT_FOUND',
  },
  // Session ids in the path.
  {
    name: 'encoded traversal id',
    method: 'GET',
    path: '/v1/sessions/..%2Fetc',
    status: 400,
    code: 'INVALID_SESSION_ID',
  },
  {
    name: 'encoded traversal id on messages',
    method: 'GET',
    path: '/v1/sessions/..%2F..%2Fetc%2Fpasswd/messages',
    status: 400,
    code: 'INVALID_SESSION_ID',
  },
  { name: 'hidden-file id', method: 'GET', path: '/v1/sessions/.hidden', status: 400, code: 'INVALID_SESSION_ID' },
  {
    name: 'dot-dot id on transcript',
    method: 'GET',
    path: '/v1/sessions/..%2E/transcript',
    status: 400,
    code: 'INVALID_SESSION_ID',
  },
  {
    name: '200-character id',
    method: 'GET',
    path: `/v1/sessions/${'a'.repeat(200)}`,
    status: 400,
    code: 'INVALID_SESSION_ID',
  },
  {
    name: 'id with a space',
    method: 'POST',
    path: '/v1/sessions/a%20b/cancel',
    status: 400,
    code: 'INVALID_SESSION_ID',
  },
  {
    name: 'id with a NUL byte',
    method: 'GET',
    path: '/v1/sessions/a%00b/events',
    status: 400,
    code: 'INVALID_SESSION_ID',
  },
  {
    name: 'broken percent-encoding',
    method: 'GET',
    path: '/v1/sessions/%E0%A4%A',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'unknown session',
    method: 'GET',
    path: '/v1/sessions/no-such-session',
    status: 404,
    code: 'SESSION_NOT_FOUND',
  },
  {
    name: 'history of an unknown session',
    method: 'GET',
    path: '/v1/sessions/no-such-session/messages',
    status: 404,
    code: 'SESSION_NOT_FOUND',
  },
  {
    name: 'resume of an unknown session',
    method: 'POST',
    path: '/v1/sessions/no-such-session/resume',
    status: 404,
    code: 'SESSION_NOT_FOUND',
  },
  // Query strings.
  { name: 'negative from', method: 'GET', path: `${A()}/events?from=-1`, status: 400, code: 'INVALID_REQUEST' },
  { name: 'fractional from', method: 'GET', path: `${A()}/events?from=1.5`, status: 400, code: 'INVALID_REQUEST' },
  { name: 'exponent from', method: 'GET', path: `${A()}/events?from=1e3`, status: 400, code: 'INVALID_REQUEST' },
  { name: 'non-numeric from', method: 'GET', path: `${A()}/events?from=abc`, status: 400, code: 'INVALID_REQUEST' },
  { name: 'repeated from', method: 'GET', path: `${A()}/events?from=1&from=2`, status: 400, code: 'INVALID_REQUEST' },
  { name: 'zero limit', method: 'GET', path: `${A()}/events?limit=0`, status: 400, code: 'INVALID_REQUEST' },
  {
    name: 'huge from',
    method: 'GET',
    path: `${A()}/events?from=99999999999999999999`,
    status: 400,
    code: 'INVALID_REQUEST',
  },
  { name: 'unknown query parameter', method: 'GET', path: `${A()}/messages?x=1`, status: 400, code: 'INVALID_REQUEST' },
  {
    name: 'bad Last-Event-ID',
    method: 'GET',
    path: `${A()}/events`,
    headers: { accept: 'text/event-stream', 'last-event-id': 'abc' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  // Fork arguments.
  {
    name: 'negative fork seq',
    method: 'POST',
    path: `${A()}/fork`,
    json: { at: -1 },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'fractional fork seq',
    method: 'POST',
    path: `${A()}/fork`,
    json: { at: 1.5 },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'fork seq past the log',
    method: 'POST',
    path: `${A()}/fork`,
    json: { at: 100000 },
    status: 400,
    code: 'INVALID_BOUNDARY',
  },
  {
    name: 'fork seq inside a turn',
    method: 'POST',
    path: `${A()}/fork`,
    json: { at: 2 },
    status: 409,
    code: 'OPEN_TURN',
  },
  {
    name: 'fork child id with a slash',
    method: 'POST',
    path: `${A()}/fork`,
    json: { id: 'a/b' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'fork onto an existing session',
    method: 'POST',
    path: `${A()}/fork`,
    json: { id: sessionB },
    status: 409,
    code: 'SESSION_ALREADY_EXISTS',
  },
  {
    name: 'compact with arguments',
    method: 'POST',
    path: `${A()}/compact`,
    json: { force: true },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  // Routing.
  { name: 'unknown route', method: 'GET', path: '/v1/nope', status: 404, code: 'NOT_FOUND' },
  { name: 'unversioned route', method: 'GET', path: '/sessions', status: 404, code: 'NOT_FOUND' },
  {
    name: "PATCH a session's messages",
    method: 'PATCH',
    path: `${A()}/messages`,
    status: 405,
    code: 'METHOD_NOT_ALLOWED',
  },
  // The budget (PATCH a session): its body is checked before the workflow hears of it.
  { name: 'PATCH a session without a body', method: 'PATCH', path: A(), status: 400, code: 'INVALID_REQUEST' },
  {
    name: 'budget with a negative limit',
    method: 'PATCH',
    path: A(),
    json: { budget: { total: { tokens: -1 } } },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'budget with an unknown cap',
    method: 'PATCH',
    path: A(),
    json: { budget: { turn: { dollars: 3 } } },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'budget with a fractional token cap',
    method: 'PATCH',
    path: A(),
    json: { budget: { turn: { tokens: 1.5 } } },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'budget that waits past 30 days',
    method: 'PATCH',
    path: A(),
    json: { budget: { waitMs: 31 * 24 * 3_600_000 } },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'create with a budget that is not an object',
    method: 'POST',
    path: '/v1/sessions',
    json: { id: 'mal-budget-x', budget: 5 },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'DELETE the sessions collection',
    method: 'DELETE',
    path: '/v1/sessions',
    status: 405,
    code: 'METHOD_NOT_ALLOWED',
  },
  {
    name: 'PUT the collection',
    method: 'PUT',
    path: '/v1/sessions',
    json: {},
    status: 405,
    code: 'METHOD_NOT_ALLOWED',
  },
  { name: 'GET a command', method: 'GET', path: `${A()}/fork`, status: 405, code: 'METHOD_NOT_ALLOWED' },
  {
    name: 'POST the health probe',
    method: 'POST',
    path: '/healthz',
    json: {},
    status: 405,
    code: 'METHOD_NOT_ALLOWED',
  },
  {
    name: 'PATCH the messages',
    method: 'PATCH',
    path: `${A()}/messages`,
    json: { text: 'hi' },
    status: 405,
    code: 'METHOD_NOT_ALLOWED',
  },
  // Text that is not well-formed UTF-16 never reaches Temporal (its gRPC refuses it as invalid UTF-8).
  {
    name: 'lone surrogate in an awaited message id',
    method: 'POST',
    path: `${A()}/messages?wait=true`,
    json: { text: 'hi', id: 'm\ud800id' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'lone surrogate in a posted message id',
    method: 'POST',
    path: `${A()}/messages`,
    json: { text: 'hi', id: 'm\ud800id' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'lone low surrogate in a message id',
    method: 'POST',
    path: `${A()}/messages`,
    json: { text: 'hi', id: '\udc00' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'lone surrogate in message text',
    method: 'POST',
    path: `${A()}/messages`,
    json: { text: 'broken \ud83d here' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'lone surrogate in awaited message text',
    method: 'POST',
    path: `${A()}/messages?wait=true`,
    json: { text: 'end \ud83d' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'reversed surrogate pair in message text',
    method: 'POST',
    path: `${A()}/messages`,
    json: { text: '\ude00\ud83d' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'lone surrogate escaped in raw JSON',
    method: 'POST',
    path: `${A()}/messages`,
    body: '{"text": "a\\ud800b"}',
    headers: json,
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'lone surrogate in the system prompt',
    method: 'POST',
    path: '/v1/sessions',
    json: { agent: { system: 'be \ud800 nice' } },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'lone surrogate in the model name',
    method: 'POST',
    path: '/v1/sessions',
    json: { agent: { model: 'fake\udfff' } },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'lone surrogate in a tool name',
    method: 'POST',
    path: '/v1/sessions',
    json: { agent: { tools: ['calc\ud800'] } },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  // More body shapes and types.
  {
    name: 'JSON followed by garbage',
    method: 'POST',
    path: `${A()}/messages`,
    body: '{"text": "hi"} trailing',
    headers: json,
    status: 400,
    code: 'INVALID_JSON',
  },
  {
    name: 'JSON string body',
    method: 'POST',
    path: `${A()}/messages`,
    body: '"hello"',
    headers: json,
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'message id of 129 characters',
    method: 'POST',
    path: `${A()}/messages`,
    json: { text: 'hi', id: 'i'.repeat(129) },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'message id of the wrong type',
    method: 'POST',
    path: `${A()}/messages`,
    json: { text: 'hi', id: { nested: true } },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'agent tools not a list',
    method: 'POST',
    path: '/v1/sessions',
    json: { agent: { tools: 'calculator' } },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'fork seq as a string',
    method: 'POST',
    path: `${A()}/fork`,
    json: { at: '1' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'gzip-encoded body',
    method: 'POST',
    path: '/v1/sessions',
    body: '{}',
    headers: { ...json, 'content-encoding': 'gzip' },
    status: 415,
    code: 'UNSUPPORTED_MEDIA_TYPE',
  },
  {
    name: 'brotli-encoded message',
    method: 'POST',
    path: `${A()}/messages`,
    body: '{"text":"hi"}',
    headers: { ...json, 'content-encoding': 'br' },
    status: 415,
    code: 'UNSUPPORTED_MEDIA_TYPE',
  },
  {
    name: 'multipart body',
    method: 'POST',
    path: `${A()}/messages`,
    body: '--b\r\n\r\nhi\r\n--b--',
    headers: { 'content-type': 'multipart/form-data; boundary=b' },
    status: 415,
    code: 'UNSUPPORTED_MEDIA_TYPE',
  },
  {
    name: 'JSON-like media type',
    method: 'POST',
    path: '/v1/sessions',
    body: '{}',
    headers: { 'content-type': 'application/jsonp' },
    status: 415,
    code: 'UNSUPPORTED_MEDIA_TYPE',
  },
  // Event ranges and the live stream's resume point.
  {
    name: 'limit above the page size',
    method: 'GET',
    path: `${A()}/events?limit=10001`,
    status: 400,
    code: 'INVALID_REQUEST',
  },
  { name: 'negative limit', method: 'GET', path: `${A()}/events?limit=-5`, status: 400, code: 'INVALID_REQUEST' },
  {
    name: 'unknown events parameter',
    method: 'GET',
    path: `${A()}/events?follow=1`,
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'Last-Event-ID at the largest safe integer',
    method: 'GET',
    path: `${A()}/events`,
    headers: { accept: 'text/event-stream', 'last-event-id': String(Number.MAX_SAFE_INTEGER) },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'Last-Event-ID just past the log',
    method: 'GET',
    path: `${A()}/events`,
    headers: { accept: 'text/event-stream', 'last-event-id': '100000' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'SSE from beyond the log',
    method: 'GET',
    path: `${A()}/events?from=100000`,
    headers: { accept: 'text/event-stream' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'negative Last-Event-ID',
    method: 'GET',
    path: `${A()}/events`,
    headers: { accept: 'text/event-stream', 'last-event-id': '-1' },
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'non-ASCII session id',
    method: 'GET',
    path: '/v1/sessions/caf%C3%A9',
    status: 400,
    code: 'INVALID_SESSION_ID',
  },
];

type RawCase = { name: string; bytes: string; status: number; code: ErrorCode };

const get = (path: string, headers = 'Host: gateway\r\n'): string => `GET ${path} HTTP/1.1\r\n${headers}\r\n`;
const post = (path: string, headers: string, body = ''): string =>
  `POST ${path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n${headers}\r\n${body}`;

/** Requests Node's HTTP parser (or Node itself, bypassing fastify) refuses, sent as raw bytes. */
const RAW_CASES: RawCase[] = [
  { name: 'garbage request line', bytes: 'GARBAGE\r\n\r\n', status: 400, code: 'INVALID_REQUEST' },
  {
    name: 'unknown method',
    bytes: 'BREW /v1/sessions HTTP/1.1\r\nHost: gateway\r\n\r\n',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'lower-case method',
    bytes: 'get /v1/sessions HTTP/1.1\r\nHost: gateway\r\n\r\n',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'TLS handshake on the plain port',
    bytes: '\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'HTTP/2 prior-knowledge preface',
    bytes: 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'unknown HTTP version',
    bytes: 'GET /v1/sessions HTTP/9.9\r\nHost: gateway\r\n\r\n',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  { name: 'space inside the path', bytes: get('/v1/sessions/a b'), status: 400, code: 'INVALID_REQUEST' },
  { name: 'control character in the path', bytes: get('/v1/sessions/a\x01b'), status: 400, code: 'INVALID_REQUEST' },
  {
    name: 'bare LF line endings',
    bytes: 'GET /v1/sessions HTTP/1.1\nHost: gateway\n\n',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: '64 KiB header',
    bytes: get('/v1/sessions', `Host: gateway\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n`),
    status: 431,
    code: 'HEADERS_TOO_LARGE',
  },
  {
    name: '3,000 small headers',
    bytes: get(
      '/v1/sessions',
      `Host: gateway\r\n${Array.from({ length: 3000 }, (_, i) => `X-H${i}: v`).join('\r\n')}\r\n`,
    ),
    status: 431,
    code: 'HEADERS_TOO_LARGE',
  },
  {
    name: 'header name with a space',
    bytes: get('/v1/sessions', 'Host: gateway\r\nX Bad: 1\r\n'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'header line without a colon',
    bytes: get('/v1/sessions', 'Host: gateway\r\nNoColon\r\n'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'NUL in a header value',
    bytes: get('/v1/sessions', 'Host: gateway\r\nX-A: a\x00b\r\n'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'folded header line',
    bytes: get('/v1/sessions', 'Host: gateway\r\nX-A: a\r\n  b\r\n'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'Content-Length plus Transfer-Encoding',
    bytes: post('/v1/sessions', 'Content-Length: 2\r\nTransfer-Encoding: chunked\r\n', '2\r\n{}\r\n0\r\n\r\n'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'Transfer-Encoding plus Content-Length',
    bytes: post('/v1/sessions', 'Transfer-Encoding: chunked\r\nContent-Length: 2\r\n', '2\r\n{}\r\n0\r\n\r\n'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'two Content-Length headers',
    bytes: post('/v1/sessions', 'Content-Length: 2\r\nContent-Length: 3\r\n', '{}'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'non-numeric Content-Length',
    bytes: post('/v1/sessions', 'Content-Length: two\r\n', '{}'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'negative Content-Length',
    bytes: post('/v1/sessions', 'Content-Length: -1\r\n', '{}'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'Transfer-Encoding without chunked',
    bytes: post('/v1/sessions', 'Transfer-Encoding: gzip\r\n', '{}'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'chunk size that is not hex',
    bytes: post(`/v1/sessions/${sessionA}/messages`, 'Transfer-Encoding: chunked\r\n', 'ZZ\r\n{}\r\n0\r\n\r\n'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'chunk size overflow',
    bytes: post(`/v1/sessions/${sessionA}/messages`, 'Transfer-Encoding: chunked\r\n', 'FFFFFFFFFFFFFFFFFF\r\n'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'oversized chunk extension',
    bytes: post(
      `/v1/sessions/${sessionA}/messages`,
      'Transfer-Encoding: chunked\r\n',
      `2;${'x'.repeat(20_000)}\r\n{}\r\n0\r\n\r\n`,
    ),
    status: 413,
    code: 'BODY_TOO_LARGE',
  },
  { name: 'HTTP/1.1 without Host', bytes: 'GET /v1/sessions HTTP/1.1\r\n\r\n', status: 400, code: 'INVALID_REQUEST' },
  {
    name: 'CONNECT to another host',
    bytes: 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
    status: 405,
    code: 'METHOD_NOT_ALLOWED',
  },
  {
    name: 'unmeetable Expect header',
    bytes: post('/v1/sessions', 'Expect: the-unexpected\r\nContent-Length: 2\r\n', '{}'),
    status: 417,
    code: 'EXPECTATION_FAILED',
  },
];

describe('malformed requests', () => {
  it(`answer each of ${CASES.length + RAW_CASES.length} malformed requests with a 4xx JSON error of the documented shape, change no log and log nothing loud`, async () => {
    expect(CASES.length + RAW_CASES.length).toBeGreaterThanOrEqual(80);
    const before = await snapshotLogs();
    const logged = logs.length;
    for (const c of CASES) {
      const response = await request(gateway.url, c.method, c.path, {
        ...(c.json !== undefined ? { json: c.json } : {}),
        ...(c.body !== undefined ? { body: c.body } : {}),
        ...(c.headers ? { headers: c.headers } : {}),
      });
      const label = `${c.name}: ${c.method} ${c.path.slice(0, 80)} -> ${response.status} ${JSON.stringify(response.body).slice(0, 300)}`;
      expect(response.status, label).toBe(c.status);
      expect(expectErrorShape(response, label), label).toBe(c.code);
      expect(ERROR_STATUS[c.code], label).toBe(c.status);
      if (c.status === 405) expect(response.headers.get('allow'), label).toBeTruthy();
    }
    for (const c of RAW_CASES) {
      const response = await rawExchange(gateway.url, [c.bytes], 5_000);
      const label = `${c.name} -> ${JSON.stringify(response.text.slice(0, 300))}`;
      expect(response.status, label).toBe(c.status);
      expect(expectRawErrorShape(response, label), label).toBe(c.code);
      expect(ERROR_STATUS[c.code], label).toBe(c.status);
      expect(response.headers.connection, label).toBe('close');
    }
    const loud = logs.slice(logged).filter((entry) => entry.level >= 40);
    expect(loud, JSON.stringify(loud.slice(0, 3))).toEqual([]);
    // The server still answers, and every session's log is exactly as it was.
    expect((await request(gateway.url, 'GET', '/healthz')).status).toBe(200);
    expect((await request(gateway.url, 'GET', `${A()}/messages`)).status).toBe(200);
    expect(await snapshotLogs()).toEqual(before);
  });
});

describe('bearer token', () => {
  const auth = { authorization: `Bearer ${TOKEN}` };

  it('is required on every route but /healthz when configured, and compared exactly', async () => {
    const refused: Array<[string, Record<string, string>]> = [
      ['/v1/sessions', {}],
      ['/v1/sessions', { authorization: 'Bearer wrong-token-0123456789abcdef' }],
      ['/v1/sessions', { authorization: `Bearer ${TOKEN}x` }],
      ['/v1/sessions', { authorization: `Bearer ${TOKEN.slice(0, -1)}` }],
      ['/v1/sessions', { authorization: TOKEN }],
      ['/v1/sessions', { authorization: `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}` }],
      [`${A()}/events`, { accept: 'text/event-stream' }],
      ['/v1/openapi.json', {}],
      ['/v1/nope', {}],
    ];
    for (const [path, headers] of refused) {
      const response = await request(guarded.url, 'GET', path, { headers });
      const label = `${path} ${JSON.stringify(headers)}`;
      expect(response.status, label).toBe(401);
      expect(expectErrorShape(response, label)).toBe('UNAUTHORIZED');
      expect(response.headers.get('www-authenticate'), label).toContain('Bearer');
    }
    const before = await snapshotLogs();
    const post = await request(guarded.url, 'POST', `${A()}/messages`, { json: { text: 'no token' } });
    expect(post.status).toBe(401);
    expect(await snapshotLogs()).toEqual(before);

    expect((await request(guarded.url, 'GET', '/v1/sessions', { headers: auth })).status).toBe(200);
    expect(
      (await request(guarded.url, 'GET', '/v1/sessions', { headers: { authorization: `bearer ${TOKEN}` } })).status,
    ).toBe(200);
    expect((await request(guarded.url, 'GET', `${A()}/messages`, { headers: auth })).status).toBe(200);
    expect((await request(guarded.url, 'GET', '/healthz')).status).toBe(200);
  });

  it('is mandatory beyond loopback: creating or starting the gateway there without one throws, naming SESSIONLOG_GATEWAY_TOKEN', async () => {
    const base = { client: stack.client, bodyLimitBytes: BODY_LIMIT };
    for (const host of ['0.0.0.0', '::', '192.168.1.10', 'example.com']) {
      expect(() => createGateway({ ...base, host }), host).toThrow(ConfigError);
      expect(() => createGateway({ ...base, host }), host).toThrow(/SESSIONLOG_GATEWAY_TOKEN/);
    }
    await expect(startGateway({ ...base, host: '0.0.0.0', port: 0 })).rejects.toThrow(/SESSIONLOG_GATEWAY_TOKEN/);
    expect(() => createGateway({ ...base, host: '127.0.0.1', token: '' })).toThrow(/SESSIONLOG_GATEWAY_TOKEN/);
    // With a token the same host is accepted; loopback needs none.
    const app = createGateway({ ...base, host: '0.0.0.0', token: TOKEN });
    await app.close();
    for (const host of ['127.0.0.1', 'localhost', '::1']) await createGateway({ ...base, host }).close();
  });
});
