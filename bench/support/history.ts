/**
 * Reading a workflow run's Temporal history for the turn benchmarks: its size as the server
 * counts it, its largest payload, the per-turn event times of a session, and why a run ended.
 * Histories are paged (a terminated naive chat holds ~50 MiB), never held whole.
 */
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';

type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

const Payload = proto.temporal.api.common.v1.Payload;
const HistoryMessage = proto.temporal.api.history.v1.History;

export type HistoryStats = {
  events: number;
  /** Encoded size of the history (`History.encode(…)`), summed page by page. */
  bytes: number;
  /** The largest single payload (activity input or result, update argument or result, …), encoded. */
  largestPayload: number;
};

function isPayload(value: object): value is proto.temporal.api.common.v1.IPayload {
  return 'data' in value && (value as { data: unknown }).data instanceof Uint8Array && 'metadata' in value;
}

/** The largest payload anywhere in `value` (an event, decoded). */
function largestPayloadIn(value: unknown, seen = 0): number {
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return seen;
  if (isPayload(value)) return Math.max(seen, Payload.encode(value).finish().length);
  let largest = seen;
  for (const child of Object.values(value)) largest = largestPayloadIn(child, largest);
  return largest;
}

/** Calls `visit` with each page of the run's history, oldest first, until `maxEvents` have been visited. */
async function eachPage(
  temporal: Client,
  workflowId: string,
  runId: string | undefined,
  visit: (events: HistoryEvent[]) => void,
  maxEvents = Number.POSITIVE_INFINITY,
): Promise<void> {
  let nextPageToken: Uint8Array | undefined;
  let visited = 0;
  do {
    const page = await temporal.workflowService.getWorkflowExecutionHistory({
      namespace: temporal.options.namespace,
      execution: { workflowId, ...(runId ? { runId } : {}) },
      // Small pages: a naive chat's activity inputs reach ~0.5 MB each late in the run, and a reply is capped at 4 MB.
      maximumPageSize: 10,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    const events = page.history?.events ?? [];
    visit(events);
    visited += events.length;
    nextPageToken = page.nextPageToken && page.nextPageToken.length > 0 ? page.nextPageToken : undefined;
  } while (nextPageToken && visited < maxEvents);
}

export async function historyStats(temporal: Client, workflowId: string, runId?: string): Promise<HistoryStats> {
  const stats: HistoryStats = { events: 0, bytes: 0, largestPayload: 0 };
  await eachPage(temporal, workflowId, runId, (events) => {
    stats.events += events.length;
    stats.bytes += HistoryMessage.encode({ events }).finish().length;
    for (const event of events) stats.largestPayload = largestPayloadIn(event, stats.largestPayload);
  });
  return stats;
}

/** The server's own count of the run's history (what its size limit is checked against). */
export async function serverHistorySize(
  temporal: Client,
  workflowId: string,
): Promise<{ bytes: number; events: number; runId: string; status: string }> {
  const described = await temporal.workflow.getHandle(workflowId).describe();
  return {
    bytes: described.historySize ?? Number.NaN,
    events: described.historyLength,
    runId: described.runId,
    status: described.status.name,
  };
}

/** How the run ended, from its last event (e.g. the reason it was terminated). */
export async function closingEvent(temporal: Client, workflowId: string): Promise<string> {
  const page = await temporal.workflowService.getWorkflowExecutionHistoryReverse({
    namespace: temporal.options.namespace,
    execution: { workflowId },
    maximumPageSize: 1,
  });
  const last = page.history?.events?.[0];
  if (!last) return 'no events';
  const terminated = last.workflowExecutionTerminatedEventAttributes;
  if (terminated) return `terminated: ${terminated.reason ?? ''} (identity ${terminated.identity ?? ''})`;
  const type = proto.temporal.api.enums.v1.EventType[last.eventType ?? 0] ?? String(last.eventType);
  return `last event ${type}`;
}

function eventTime(event: HistoryEvent): number {
  const t = event.eventTime;
  if (!t) return Number.NaN;
  const seconds = typeof t.seconds === 'number' ? t.seconds : Number(t.seconds?.toString() ?? Number.NaN);
  return seconds * 1000 + (t.nanos ?? 0) / 1e6;
}

/** Server event times of a workflow task (wall-clock ms). */
export type TaskTimes = { scheduled: number; started?: number; completed?: number };

/** Server event times of one update-driven turn (wall-clock ms). */
export type TurnEventTimes = {
  /** The workflow task that accepted the update (and scheduled the activity). */
  acceptTask?: TaskTimes;
  updateAccepted: number;
  activityScheduled?: number;
  activityStarted?: number;
  activityCompleted?: number;
  /** The workflow task after the activity completed (it completes the update). */
  completeTask?: TaskTimes;
  updateCompleted?: number;
};

/**
 * Per update id: the workflow task that accepted the update, when the server accepted it,
 * scheduled, started and completed the first activity named `activity` after it, the next
 * workflow task, and when the update completed.
 */
export async function turnEventTimes(
  temporal: Client,
  workflowId: string,
  runId: string | undefined,
  activity: string,
  maxEvents?: number,
): Promise<Map<string, TurnEventTimes>> {
  const turns = new Map<string, TurnEventTimes>();
  const bySchedule = new Map<string, TurnEventTimes>();
  let current: TurnEventTimes | undefined;
  let task: TaskTimes | undefined;
  await eachPage(
    temporal,
    workflowId,
    runId,
    (events) => {
      for (const event of events) {
        const at = eventTime(event);
        if (event.workflowTaskScheduledEventAttributes) {
          task = { scheduled: at };
          // The first task after the turn's activity completed is the one that completes the update.
          if (current?.activityCompleted !== undefined && current.completeTask === undefined)
            current.completeTask = task;
          continue;
        }
        if (event.workflowTaskStartedEventAttributes && task) {
          task.started = at;
          continue;
        }
        if (event.workflowTaskCompletedEventAttributes && task) {
          task.completed = at;
          continue;
        }
        const accepted = event.workflowExecutionUpdateAcceptedEventAttributes;
        if (accepted) {
          const id = accepted.acceptedRequest?.meta?.updateId ?? accepted.protocolInstanceId ?? '';
          current = { updateAccepted: at, ...(task ? { acceptTask: task } : {}) };
          turns.set(id, current);
          continue;
        }
        const scheduled = event.activityTaskScheduledEventAttributes;
        if (
          scheduled &&
          current &&
          current.activityScheduled === undefined &&
          scheduled.activityType?.name === activity
        ) {
          current.activityScheduled = at;
          bySchedule.set(String(event.eventId), current);
          continue;
        }
        const started = event.activityTaskStartedEventAttributes;
        if (started) {
          const turn = bySchedule.get(String(started.scheduledEventId));
          if (turn) turn.activityStarted = at;
          continue;
        }
        const completed = event.activityTaskCompletedEventAttributes;
        if (completed) {
          const turn = bySchedule.get(String(completed.scheduledEventId));
          if (turn) turn.activityCompleted = at;
          continue;
        }
        const updated = event.workflowExecutionUpdateCompletedEventAttributes;
        if (updated) {
          const turn = turns.get(updated.meta?.updateId ?? '');
          if (turn) turn.updateCompleted = at;
        }
      }
    },
    maxEvents,
  );
  return turns;
}
