export { sessionWorkflow } from './session-workflow.js';
