/** The turn engine (DESIGN §2): the session loop's operations, free of Temporal. */
export * from './agent.js';
export * from './deps.js';
export * from './engine.js';
export * from './errors.js';
export * from './log-writer.js';
export * from './ops.js';
export * from './telemetry.js';
export * from './outcomes.js';
export * from './types.js';
