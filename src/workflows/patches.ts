/**
 * Every `patched()` id of the session workflow, with what it changed. Recorded histories of runs
 * before a patch replay its old path (test/workflows/replay.test.ts); once no such run can be
 * open any more, a patch's old path may be deleted (`deprecatePatch`, then the id).
 */

/** Continue-as-new no longer waits for `send`s that the finished turn already answered. */
export const CAN_AFTER_ANSWERED_SENDS = 'continue-as-new-after-answered-sends';

/**
 * A turn whose first step failed before the log took anything of it gives its number back; its
 * messages wait in the queue while the store is unavailable, and are refused otherwise.
 */
export const TURN_NOT_LOGGED = 'turn-not-logged-gives-number-back';

/**
 * A note that only changes the budget, arriving while a turn runs or waits for an approval, is
 * answered at once (`turn-end`) and logged once nothing runs, as before; builds before it
 * answered only once it was logged.
 */
export const BUDGET_ANSWERS_AT_ONCE = 'budget-change-answers-at-once';

/**
 * A note or a compaction asked for with `atOnce` while a turn runs is answered at once
 * (`turn-end`) and logged or run once nothing runs, before the next turn; builds before it
 * answered once it was done.
 */
export const ANSWERS_AT_ONCE_WHEN_ASKED = 'answers-at-once-when-asked';

/**
 * The turn loop and the update handlers run in a scope that keeps nothing per turn (run-scope.ts);
 * a cancel of the workflow itself cancels the running turn and closes the session. It moves when
 * an update's answer is sent (a few promise steps later), so runs before it replay without it.
 */
export const RUN_SCOPE = 'run-scope';
