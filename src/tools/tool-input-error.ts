/** Bad arguments from the model: reported back to the model as an error result, not retried. */
export class ToolInputError extends Error {
  readonly code = 'TOOL_INPUT_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'ToolInputError';
  }
}
