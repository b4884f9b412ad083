/**
 * What a sessionlog process does with a fault nothing caught (an uncaught exception or an
 * unhandled rejection), the same in `serve`, `worker` and `dev`:
 *
 * - A fault raised inside an HTTP request's async context (request-scope.ts: the code ran for
 *   that request, in a handler, a body stream, a timer or a promise the request started) is
 *   local to that request: it is logged with the request id, counted
 *   (`sessionlog_process_faults_total{disposition="request"}`), the request's connection is
 *   closed, and the process keeps serving every other client.
 * - Any other fault may have left shared state (a store connection, the Temporal worker, a
 *   watch) half changed: it is logged and counted (`disposition="exit"`) and the process exits
 *   with status 70 (EX_SOFTWARE) so that its supervisor (systemd, Kubernetes, the `dev` parent)
 *   restarts it. Sessions lose nothing: the log is the truth and Temporal retries the work.
 * - Once the process is stopping (`stopping`), a fault is logged and counted
 *   (`disposition="stopping"`) and the stopping goes on: what is closing may still fire (a
 *   Temporal client's retry timer finding its channel shut), and exiting then would leave the
 *   rest unstopped (`dev`'s Temporal dev server, the store's last writes).
 */
import { currentRequestScope } from '../gateway/request-scope.js';
import type { Telemetry } from '../telemetry/index.js';

/** Exit status of a process stopped by a fault outside any request (sysexits' EX_SOFTWARE). */
export const FAULT_EXIT_STATUS = 70;

type FaultKind = 'exception' | 'rejection';
type FaultDisposition = 'request' | 'exit' | 'stopping';

export type FaultPolicyOptions = {
  /** Where the fault is reported (a pino logger, or anything with `error` and `fatal`). */
  log: {
    error(fields: Record<string, unknown>, message: string): void;
    fatal(fields: Record<string, unknown>, message: string): void;
  };
  /** Counts the fault (the process's metrics). */
  count?(kind: FaultKind, disposition: FaultDisposition): void;
  /** Whether the process is stopping: a fault then neither exits nor counts as one to exit for. */
  stopping?(): boolean;
  /** Ends the process (default `process.exit`); replaced in tests. */
  exit?(status: number): void;
};

/** Installs the policy on this process; returns a function that removes it. */
export function installFaultPolicy(options: FaultPolicyOptions): () => void {
  const exit = options.exit ?? ((status: number) => process.exit(status));
  const handle = (kind: FaultKind, fault: unknown): void => {
    const err = fault instanceof Error ? fault : new Error(`non-error ${kind}: ${String(fault)}`);
    const scope = currentRequestScope();
    if (scope) {
      options.count?.(kind, 'request');
      options.log.error(
        { err, reqId: scope.id, method: scope.method, url: scope.url, fault: kind },
        'a request failed outside its handler; its connection was closed and the process keeps serving',
      );
      scope.abandon();
      return;
    }
    if (options.stopping?.()) {
      options.count?.(kind, 'stopping');
      options.log.error({ err, fault: kind }, 'a fault while the process stops; it goes on stopping');
      return;
    }
    options.count?.(kind, 'exit');
    options.log.fatal(
      { err, fault: kind },
      `a fault outside any request; exiting with status ${FAULT_EXIT_STATUS} so the supervisor restarts the process`,
    );
    exit(FAULT_EXIT_STATUS);
  };
  const onException = (error: unknown): void => handle('exception', error);
  const onRejection = (reason: unknown): void => handle('rejection', reason);
  process.on('uncaughtException', onException);
  process.on('unhandledRejection', onRejection);
  return () => {
    process.off('uncaughtException', onException);
    process.off('unhandledRejection', onRejection);
  };
}

/** The policy with the process's own logger and metrics; `exit` and `stopping` as in FaultPolicyOptions. */
export function installProcessFaultPolicy(
  telemetry: Telemetry,
  exit?: (status: number) => void,
  stopping?: () => boolean,
): () => void {
  return installFaultPolicy({
    log: telemetry.logger,
    count: (kind, disposition) => telemetry.metrics.processFaults.inc({ kind, disposition }),
    ...(exit ? { exit } : {}),
    ...(stopping ? { stopping } : {}),
  });
}
