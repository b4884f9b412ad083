#!/usr/bin/env node
/**
 * The `sessionlog` command (DESIGN §8): `dev`, `worker`, `serve`, `chat`, `send` and
 * `sessions …`. Human-readable output by default, `--json` for scripts. Exit codes: 0 ok,
 * 1 failure (or a verify violation), 2 bad usage or configuration.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { openConfiguredStore, type SessionStore } from '../compose.js';
import { ConfigError, resolveConfig, type Config } from '../config.js';
import { isLoopbackHost } from '../gateway/settings.js';
import type { SessionClient } from '../client/session-client.js';
import { SessionlogError, scrubSecrets } from '../session/index.js';
import { runChat } from './chat.js';
import { connectClient, defaultStore, devHome, homeStore, packageRoot, temporalAddressFor } from './runtime.js';
import {
  answerApproval,
  compactSession,
  listApprovals,
  exportSession,
  forkSession,
  listSessions,
  resumeSession,
  sendMessage,
  seqArgument,
  showEvents,
  eraseSession,
  salvageSession,
  showContext,
  showHistory,
  showSession,
  verifyExportFile,
  verifySession,
  type Output,
} from './sessions.js';

const PACKAGE_VERSION = (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string })
  .version;

type GlobalOptions = {
  store?: string;
  temporal?: string;
  namespace?: string;
  taskQueue?: string;
  model?: string;
  json?: boolean;
};

const program = new Command()
  .name('sessionlog')
  .description('LLM agent chat sessions as durable Temporal workflows over an append-only event log')
  .option('--store <url>', 'session store: sqlite:PATH, jsonl:DIR or postgres://… (env SESSIONLOG_STORE)')
  .option('--temporal <host:port>', 'Temporal frontend address (env TEMPORAL_ADDRESS)')
  .option('--namespace <ns>', 'Temporal namespace (env TEMPORAL_NAMESPACE)')
  .option('--task-queue <name>', 'task queue of the session workflows (env SESSIONLOG_TASK_QUEUE)')
  .option('--model <name>', 'model name (env SESSIONLOG_MODEL)')
  .option('--json', 'print JSON instead of tables')
  .showHelpAfterError();

/**
 * The configuration of every command but `dev`. Without TEMPORAL_ADDRESS (or --temporal) the
 * commands talk to the running `sessionlog dev` (SESSIONLOG_HOME's, or the nearest
 * .sessionlog/ here or above) and, without SESSIONLOG_STORE (or --store), open its store.
 */
function config(): Config {
  const o = program.opts<GlobalOptions>();
  const temporalConfigured = Boolean(o.temporal || process.env.TEMPORAL_ADDRESS);
  return resolveConfig(process.env, {
    SESSIONLOG_STORE: o.store || process.env.SESSIONLOG_STORE || defaultStore(temporalConfigured),
    ...(o.temporal ? { TEMPORAL_ADDRESS: o.temporal } : {}),
    ...(o.namespace ? { TEMPORAL_NAMESPACE: o.namespace } : {}),
    ...(o.taskQueue ? { SESSIONLOG_TASK_QUEUE: o.taskQueue } : {}),
    ...(o.model ? { SESSIONLOG_MODEL: o.model } : {}),
  });
}

function output(): Output {
  return { json: program.opts<GlobalOptions>().json === true, write: (text) => process.stdout.write(text) };
}

/**
 * Runs `fn` with an open store and a client over it, closing both afterwards. Reads (`list`,
 * `export`, `verify`, …) pass `lazy`: the Temporal connection is made only if a command needs it,
 * so they work on a store alone.
 */
async function withClient<T>(
  fn: (ctx: { store: SessionStore; client: Awaited<ReturnType<typeof connectClient>>; cfg: Config }) => Promise<T>,
  options: { lazy?: boolean } = {},
): Promise<T> {
  const cfg = config();
  if (!options.lazy) temporalAddressFor(cfg);
  const store = await openConfiguredStore(cfg);
  try {
    const client = await connectClient(cfg, store, options);
    try {
      return await fn({ store, client, cfg });
    } finally {
      await client.temporal.connection.close();
    }
  } finally {
    await store.close();
  }
}

/** Log lines of the fleet commands (`worker`, `serve`): timestamped, on stdout. */
function fleetLog(line: string): void {
  process.stdout.write(`${new Date().toISOString()} ${line}\n`);
}

/**
 * A fleet process whose run has ended (drained, or failed) must end too, even if something it
 * cannot close still holds the event loop: a Temporal SDK `Worker.create` that fails after
 * starting its workflow threads leaves them running, which kept a worker alive with its
 * operations listener closed. The timer is unref'd, so it fires only in that case.
 */
function exitOnceSettled(): void {
  setTimeout(() => process.exit(), 2_000).unref();
}

program
  .command('dev')
  .description(
    'start a local Temporal dev server, a worker and the HTTP gateway (data in ./.sessionlog, or $SESSIONLOG_HOME)',
  )
  .option('--port <port>', 'gateway port (env SESSIONLOG_PORT, default 8787)')
  .action(async (o: { port?: string }) => {
    const home = devHome();
    const cfg = resolveConfig(process.env, {
      ...(o.port ? { SESSIONLOG_PORT: o.port } : {}),
      SESSIONLOG_STORE: program.opts<GlobalOptions>().store || process.env.SESSIONLOG_STORE || homeStore(home),
    });
    const { runDev } = await import('./dev.js');
    await runDev(cfg, undefined, home);
  });

program
  .command('worker')
  .description('run a worker for the session workflows (needs TEMPORAL_ADDRESS); SIGTERM drains it')
  .action(async () => {
    const cfg = config();
    const { runWorkerProcess } = await import('./worker-process.js');
    try {
      process.exitCode = await runWorkerProcess(cfg, fleetLog);
    } finally {
      exitOnceSettled();
    }
  });

program
  .command('serve')
  .description("run the HTTP gateway (needs TEMPORAL_ADDRESS and the workers' store)")
  .option('--host <host>', 'listen address (env SESSIONLOG_HOST, default 127.0.0.1)')
  .option('--port <port>', 'port (env SESSIONLOG_PORT, default 8787)')
  .action(async (o: { host?: string; port?: string }) => {
    const cfg = resolveConfig(process.env, {
      ...(o.host ? { SESSIONLOG_HOST: o.host } : {}),
      ...(o.port ? { SESSIONLOG_PORT: o.port } : {}),
      SESSIONLOG_STORE: config().store,
      ...(program.opts<GlobalOptions>().temporal ? { TEMPORAL_ADDRESS: program.opts<GlobalOptions>().temporal! } : {}),
    });
    if (!isLoopbackHost(cfg.gateway.host) && !cfg.gateway.token && cfg.gateway.tokens.length === 0) {
      throw new ConfigError(
        `SESSIONLOG_GATEWAY_TOKEN or SESSIONLOG_GATEWAY_TOKENS must be set to listen on ${cfg.gateway.host} (beyond loopback)`,
      );
    }
    const { runServeProcess } = await import('./serve-process.js');
    process.exitCode = await runServeProcess(cfg, fleetLog);
  });

program
  .command('chat')
  .description('chat with a session interactively (streams the reply)')
  .option('--session <id>', 'session id (default: a new one)')
  .action(async (o: { session?: string }) => {
    await withClient(({ client }) => runChat(client, o.session ? { sessionId: o.session } : {}));
  });

program
  .command('send')
  .description(
    'send one message and print the reply; starts session ID when it does not exist yet (as chat does; over HTTP, POST /v1/sessions first)',
  )
  .argument('<id>', 'session id (started if new)')
  .argument('<text...>', 'message text')
  .action(async (id: string, text: string[]) => {
    await withClient(({ client }) => sendMessage(client, id, text.join(' '), output()));
  });

const sessions = program.command('sessions').description('inspect and operate on stored sessions');
/** The client as `tenant` sees the store, or the operator's (every tenant's) without one. */
const asTenant = (client: SessionClient, tenant: string | undefined): SessionClient =>
  tenant === undefined ? client : client.forTenant(tenant);
const TENANT_OPTION = [
  '--tenant <name>',
  "only this tenant's sessions (default: every tenant's, as an operator)",
] as const;

sessions
  .command('list')
  .option(...TENANT_OPTION)
  .description('list sessions')
  .action((o: { tenant?: string }) =>
    withClient(({ client }) => listSessions(asTenant(client, o.tenant), output()), { lazy: true }),
  );
sessions
  .command('show')
  .argument('<id>')
  .description('header, size and live status')
  .action((id: string) => withClient(({ client }) => showSession(client, id, output())));
sessions
  .command('history')
  .argument('<id>')
  .description('the derived model history')
  .action((id: string) => withClient(({ client }) => showHistory(client, id, output()), { lazy: true }));
sessions
  .command('events')
  .argument('<id>')
  .option('--from <seq>', 'first seq', '0')
  .option('--follow', 'keep printing events as they are appended (Ctrl-C to stop)')
  .description('the raw event log')
  .action(async (id: string, o: { from: string; follow?: boolean }) => {
    const stop = new AbortController();
    process.once('SIGINT', () => stop.abort());
    await withClient(({ client }) =>
      showEvents(client, id, output(), {
        from: seqArgument(o.from, '--from'),
        follow: o.follow === true,
        signal: stop.signal,
      }),
    );
  });
sessions
  .command('export')
  .argument('<id>')
  .option('-o, --out <file>', 'write to a new file instead of stdout')
  .description('export the session as JSONL (header line, then one event per line)')
  .action((id: string, o: { out?: string }) =>
    withClient(
      ({ client }) =>
        exportSession(
          client,
          id,
          o.out,
          (text) => process.stdout.write(text),
          (text) => process.stderr.write(text),
        ),
      { lazy: true },
    ),
  );
sessions
  .command('fork')
  .argument('<id>')
  .option('--at <seq>', 'last seq to copy (default: the whole log)')
  .option('--child <id>', 'id of the new session (default: a new UUID)')
  .description('copy a session (up to a seq) into a new session that names its parent')
  .action((id: string, o: { at?: string; child?: string }) =>
    withClient(({ client }) =>
      forkSession(
        client,
        id,
        { ...(o.at !== undefined ? { at: seqArgument(o.at, '--at') } : {}), ...(o.child ? { childId: o.child } : {}) },
        output(),
      ),
    ),
  );
sessions
  .command('compact')
  .argument('<id>')
  .description('summarise older history now (the log keeps everything)')
  .action((id: string) => withClient(({ client }) => compactSession(client, id, output())));
sessions
  .command('salvage')
  .argument('<id>', 'the damaged session')
  .option('--into <id>', 'id of the new session (default: a new UUID)')
  .description('copy the longest valid prefix of a damaged session into a new one (the damaged one is left as it is)')
  .action((id: string, o: { into?: string }) =>
    withClient(({ client }) => salvageSession(client, id, o.into, output())),
  );
sessions
  .command('erase')
  .argument('<id>')
  .option('--yes', 'do not ask for confirmation')
  .option(...TENANT_OPTION)
  .description(
    'erase a session: its log, artifacts, checkpoints and workflow histories (the id is refused for a while afterwards)',
  )
  .action(async (id: string, o: { yes?: boolean; tenant?: string }) => {
    if (!o.yes && !(await confirm(`erase session ${id} and everything it holds? this cannot be undone [y/N] `))) {
      process.stderr.write('not erased\n');
      process.exitCode = 1;
      return;
    }
    await withClient(({ client }) => eraseSession(asTenant(client, o.tenant), id, output()));
  });
sessions
  .command('context')
  .argument('<id>')
  .description("what the session's next request costs, by kind, against its budget and window")
  .action((id: string) => withClient(({ client }) => showContext(client, id, output()), { lazy: true }));
sessions
  .command('resume')
  .argument('<id>')
  .description('start a new workflow run for a session whose workflow is gone')
  .action((id: string) => withClient(({ client }) => resumeSession(client, id, output())));
sessions
  .command('verify')
  .argument('[ids...]', 'stored sessions (one or more)')
  .option('--file <path>', 'verify an exported JSONL file instead of a stored session')
  .description('check the log invariants; exits 1 on a violation')
  .action(async (ids: string[], o: { file?: string }) => {
    if ((ids.length === 0) === (o.file === undefined))
      throw new ConfigError('give either session ids or --file <export.jsonl>');
    if (o.file) {
      if ((await verifyExportFile(o.file, output())).length > 0) process.exitCode = 1;
      return;
    }
    const violations = await withClient(
      ({ client }) =>
        ids.length === 1 ? verifySession(client, ids[0]!, output()) : verifySessions(client, ids, output()),
      { lazy: true },
    );
    if (violations.length > 0) process.exitCode = 1;
  });

/** Verifies several sessions: a line per session (`ID: ok …`), or with --json one object keyed by id. */
async function verifySessions(client: SessionClient, ids: string[], out: Output): Promise<unknown[]> {
  const all: unknown[] = [];
  const reports: Record<string, unknown> = {};
  for (const id of ids) {
    let text = '';
    all.push(...(await verifySession(client, id, { json: out.json, write: (chunk) => (text += chunk) })));
    if (out.json) reports[id] = JSON.parse(text) as unknown;
    else out.write(text.replace(/^(?=.)/gm, `${id}: `));
  }
  if (out.json) out.write(`${JSON.stringify(reports, null, 2)}\n`);
  return all;
}

const approvals = program
  .command('approvals')
  .description('tool calls waiting for an answer (approval or an external result)');
approvals
  .command('list')
  .option('--session <id>', 'only this session')
  .description('list the calls waiting for an answer across sessions')
  .action((o: { session?: string }) =>
    withClient(({ client }) => listApprovals(client, o.session, output()), { lazy: true }),
  );
approvals
  .command('approve')
  .argument('<session>', 'session id')
  .argument('<callId>', 'the tool call id')
  .option('--reason <text>', 'why (logged)')
  .option('--by <name>', 'who answers (logged)')
  .option('--args <json>', 'run the call with these edited arguments (a JSON object)')
  .option('--always', 'allow this tool without asking for the rest of the session')
  .description('approve a waiting tool call')
  .action((sessionId: string, callId: string, o: { reason?: string; by?: string; args?: string; always?: boolean }) =>
    withClient(({ client }) =>
      answerApproval(
        client,
        sessionId,
        callId,
        {
          decision: 'approve',
          ...answerOptions(o),
          ...(o.args !== undefined ? { arguments: o.args } : {}),
          ...(o.always ? { allowForSession: true } : {}),
        },
        output(),
      ),
    ),
  );
approvals
  .command('deny')
  .argument('<session>', 'session id')
  .argument('<callId>', 'the tool call id')
  .option('--reason <text>', 'why (logged; the model sees it)')
  .option('--by <name>', 'who answers (logged)')
  .description('deny a waiting tool call')
  .action((sessionId: string, callId: string, o: { reason?: string; by?: string }) =>
    withClient(({ client }) =>
      answerApproval(client, sessionId, callId, { decision: 'deny', ...answerOptions(o) }, output()),
    ),
  );

/** Asks a yes/no question on the terminal; false without a terminal (use --yes in scripts). */
async function confirm(question: string): Promise<boolean> {
  if (!process.stdin.isTTY) return false;
  const { createInterface } = await import('node:readline/promises');
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

function answerOptions(o: { reason?: string; by?: string }): { reason?: string; by?: string } {
  return { ...(o.reason !== undefined ? { reason: o.reason } : {}), ...(o.by !== undefined ? { by: o.by } : {}) };
}

program.version(PACKAGE_VERSION, '--version', 'print the version');

async function main(): Promise<void> {
  // `sessionlog … | head` closes our stdout early: that is not an error.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(0);
    throw error;
  });
  try {
    await program.parseAsync(process.argv);
  } catch (error) {
    const code = error instanceof ConfigError ? 2 : 1;
    const label =
      error instanceof SessionlogError ? `${error.code}: ` : error instanceof ConfigError ? 'configuration: ' : '';
    process.stderr.write(`sessionlog: ${label}${scrubSecrets((error as Error).message)}\n`);
    process.exitCode = code;
  }
}

await main();
