/**
 * Every op key and compaction id the engine writes with (DESIGN §3, §4.1). The grammar, each
 * key's maker and its parser, is `session/op-keys.ts`: the gateway reads a chunk batch's model
 * call back from its key, and the gateway may not import the engine, so the grammar sits in the
 * layer both import. This module is the engine's name for it.
 */
export {
  attemptKey,
  compactionId,
  compactionOp,
  endTurnOp,
  noteOp,
  repairOp,
  runOp,
  seedOp,
  settingOp,
  stepCompactionPrefix,
  stepOps,
  type AttemptKey,
  type CompactionKey,
  type StepKey,
} from '../session/op-keys.js';
