/**
 * Bench-only probes for bench/idle.ts, with no timing code in src/: a store whose top-level
 * method calls are timed (summed, so overlapping calls count twice), and the server-side times
 * of a turn read back from a workflow's Temporal history (workflow tasks, which include replay
 * and local activities, and activity tasks).
 */
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { SessionStore } from '../../src/persistence/store.js';

type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

/** Summed time and count of the store calls made since the last {@link StoreTimer.take}. */
export type StoreTime = { ms: number; calls: number };

/** Wraps a store so that every call of one of its own methods is timed. */
export class StoreTimer {
  private ms = 0;
  private calls = 0;

  wrap(store: SessionStore): SessionStore {
    return new Proxy(store, {
      get: (target, prop) => {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]): unknown => {
          const start = performance.now();
          const result: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
          if (result instanceof Promise) return result.finally(() => this.add(start));
          this.add(start);
          return result;
        };
      },
    });
  }

  /** The time summed since the last take, and starts a new sum. */
  take(): StoreTime {
    const taken = { ms: this.ms, calls: this.calls };
    this.ms = 0;
    this.calls = 0;
    return taken;
  }

  private add(start: number): void {
    this.ms += performance.now() - start;
    this.calls += 1;
  }
}

/** Wall-clock milliseconds with sub-millisecond resolution (comparable with history event times). */
export function wallNow(): number {
  return performance.timeOrigin + performance.now();
}

/** What the server recorded of a turn: workflow tasks and activity tasks started inside its window. */
export type ServerTimes = {
  /** Workflow tasks: started → completed (the worker's processing, replay and local activities included). */
  taskMs: number;
  /** Workflow tasks: scheduled → started (waiting for a poller). */
  taskWaitMs: number;
  tasks: number;
  /** Workflow tasks that failed or timed out in the window. */
  failedTasks: number;
  /** Activity tasks: started → completed. */
  activityMs: number;
  /** Activity tasks: scheduled → started. */
  activityWaitMs: number;
  activities: number;
};

function eventTime(event: HistoryEvent): number {
  const t = event.eventTime;
  if (!t) return Number.NaN;
  const seconds = typeof t.seconds === 'number' ? t.seconds : Number(t.seconds?.toString() ?? Number.NaN);
  return seconds * 1000 + (t.nanos ?? 0) / 1e6;
}

const key = (id: unknown): string => String(id);

/** The server times of the tasks of `events` that started within [start, end] (wall ms). */
export function serverTimesIn(events: readonly HistoryEvent[], start: number, end: number): ServerTimes {
  const times: ServerTimes = {
    taskMs: 0,
    taskWaitMs: 0,
    tasks: 0,
    failedTasks: 0,
    activityMs: 0,
    activityWaitMs: 0,
    activities: 0,
  };
  const at = new Map<string, number>();
  const inWindow = (t: number) => t >= start && t <= end;
  for (const event of events) {
    const t = eventTime(event);
    at.set(key(event.eventId), t);
    const taskStarted = event.workflowTaskStartedEventAttributes;
    if (taskStarted && inWindow(t)) {
      times.taskWaitMs += t - (at.get(key(taskStarted.scheduledEventId)) ?? t);
      continue;
    }
    const taskDone = event.workflowTaskCompletedEventAttributes;
    if (taskDone) {
      const started = at.get(key(taskDone.startedEventId));
      if (started !== undefined && inWindow(started)) {
        times.taskMs += t - started;
        times.tasks += 1;
      }
      continue;
    }
    const taskFailed = event.workflowTaskFailedEventAttributes ?? event.workflowTaskTimedOutEventAttributes;
    if (taskFailed && inWindow(t)) {
      times.failedTasks += 1;
      continue;
    }
    const activityStarted = event.activityTaskStartedEventAttributes;
    if (activityStarted && inWindow(t)) {
      times.activityWaitMs += t - (at.get(key(activityStarted.scheduledEventId)) ?? t);
      continue;
    }
    const activityDone = event.activityTaskCompletedEventAttributes;
    if (activityDone) {
      const started = at.get(key(activityDone.startedEventId));
      if (started !== undefined && inWindow(started)) {
        times.activityMs += t - started;
        times.activities += 1;
      }
    }
  }
  return times;
}

/**
 * Waits until the workflow's run has closed (a long poll for its close event), without decoding
 * its result: a session's result is sealed with the session's key, which a bare client cannot open.
 */
export async function waitClosed(temporal: Client, workflowId: string): Promise<void> {
  for (;;) {
    const page = await temporal.workflowService.getWorkflowExecutionHistory({
      namespace: temporal.options.namespace,
      execution: { workflowId },
      waitNewEvent: true,
      historyEventFilterType: proto.temporal.api.enums.v1.HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT,
    });
    if ((page.history?.events?.length ?? 0) > 0) return;
  }
}
