/**
 * Structured logs (DESIGN §8 "Operations"): one JSON object per line with `pino`, from worker
 * and gateway alike, at the level `SESSIONLOG_LOG_LEVEL` names; human-readable lines in
 * `sessionlog dev`.
 *
 * - Inside an activity every line carries the session id, workflow run id, activity type and
 *   attempt (a mixin reads Temporal's activity context), so engine code need not pass them.
 * - The Temporal SDK's own logger (workflow `log`, activity `log`, the worker, and the core's
 *   forwarded lines) goes through the same logger: see {@link temporalLogger}.
 * - Secrets never leave: every line is scrubbed of bearer tokens and API-key-looking strings
 *   before it is written, whatever field they hide in.
 */
import { Context } from '@temporalio/activity';
import type { LogLevel, LogMetadata, Logger as TemporalLogger } from '@temporalio/common';
import pino, { type DestinationStream, type Level, type Logger } from 'pino';
import pinoPretty from 'pino-pretty';
import { sessionOfWorkflow } from './attributes.js';

export type LogLevelSetting = Level | 'silent';
export const LOG_LEVELS: readonly LogLevelSetting[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export type LoggerOptions = {
  level: LogLevelSetting;
  /** `json` (one object per line, the default) or `pretty` (for a terminal: `sessionlog dev`). */
  format?: 'json' | 'pretty';
  /** The process part: `worker`, `gateway`, `dev`. */
  name?: string;
  /** Where lines go (default stdout). */
  destination?: DestinationStream;
};

/**
 * Strings that look like credentials: provider API keys (`sk-…`, `sk-proj-…`, `sk-ant-…`),
 * bearer tokens, and `key=`/`token=`-style assignments. Replaced with `[REDACTED]`.
 */
const SECRET_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  [/\bsk-[A-Za-z0-9_-]{12,}/g, '[REDACTED]'],
  [/\b(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi, '$1[REDACTED]'],
  [/\b((?:api[_-]?key|apikey|token|secret|password)\\?["']?\s*[:=]\s*\\?["']?)[^\s"'\\,&}]{8,}/gi, '$1[REDACTED]'],
];

/** Replaces credential-looking substrings of `text`; see SECRET_PATTERNS. */
export function scrubSecrets(text: string): string {
  let out = text;
  for (const [pattern, replacement] of SECRET_PATTERNS) out = out.replace(pattern, replacement);
  return out;
}

/** The running activity's identity, when the line is logged inside one. */
function activityFields(): Record<string, unknown> {
  let ctx: Context;
  try {
    ctx = Context.current();
  } catch (error) {
    // Not inside an activity: the line carries what its caller gave.
    void error;
    return {};
  }
  const { info } = ctx;
  // Log lines that only know the workflow carry the session its id names.
  const sessionId = sessionOfWorkflow(info.workflowExecution?.workflowId);
  return {
    activity: info.activityType,
    attempt: info.attempt,
    ...(info.workflowExecution ? { runId: info.workflowExecution.runId } : {}),
    ...(sessionId !== undefined ? { sessionId } : {}),
  };
}

/** A pino logger for a process part; see the module comment for what every line carries. */
export function createLogger(options: LoggerOptions): Logger {
  const destination =
    options.destination ??
    (options.format === 'pretty'
      ? pinoPretty({
          colorize: process.stdout.isTTY === true,
          sync: true,
          ignore: 'pid,hostname',
          translateTime: 'HH:MM:ss.l',
        })
      : pino.destination({ sync: true }));
  return pino(
    {
      level: options.level,
      ...(options.name ? { name: options.name } : {}),
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      mixin: activityFields,
      redact: {
        paths: ['apiKey', '*.apiKey', 'headers.authorization', 'req.headers.authorization', 'authorization'],
        censor: '[REDACTED]',
      },
      hooks: { streamWrite: scrubSecrets },
    },
    destination,
  );
}

const LEVEL_OF: Record<LogLevel, Level> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/**
 * The Temporal SDK's `Logger` over a pino logger (for `Runtime.install({ logger })`). Workflow
 * and activity lines carry the SDK's metadata (workflowId, runId, activityType…) plus the
 * session id read from the workflow id.
 */
export function temporalLogger(logger: Logger): TemporalLogger {
  const write = (level: LogLevel, message: string, meta?: LogMetadata): void => {
    const fields: Record<string, unknown> = { ...meta };
    const sessionId = sessionOfWorkflow(typeof fields.workflowId === 'string' ? fields.workflowId : undefined);
    if (sessionId !== undefined && fields.sessionId === undefined) fields.sessionId = sessionId;
    logger[LEVEL_OF[level]](fields, message);
  };
  return {
    log: write,
    trace: (message, meta) => write('TRACE', message, meta),
    debug: (message, meta) => write('DEBUG', message, meta),
    info: (message, meta) => write('INFO', message, meta),
    warn: (message, meta) => write('WARN', message, meta),
    error: (message, meta) => write('ERROR', message, meta),
  };
}
