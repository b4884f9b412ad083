/**
 * Model names as applications use them (issue 24): `GET /models`, and what a requested name
 * runs. Names the gateway's routing knows run as themselves (catalogue models of the workers'
 * provider) or as the model they alias; any other name runs the default model, or is refused
 * when the routing says so (SESSIONLOG_UNKNOWN_MODELS=refuse). A response reports the model
 * that ran.
 */
import type { ModelRouting, RouteContext } from '../route-table.js';
import { OpenAiError, notFound } from '../openai-errors.js';

export type { ModelRouting };

/** The routing of a gateway configured with none: the default model by its name, any other name runs it too. */
export function defaultModelRouting(defaultModel: string | undefined): ModelRouting {
  return { names: defaultModel ? { [defaultModel]: defaultModel } : {}, unknown: 'default' };
}

/**
 * The model a requested name runs (undefined: the session's own, when the gateway knows no
 * default). Throws OpenAI's 404 `model_not_found` for an unknown name the routing refuses.
 */
export function resolveModelName(ctx: RouteContext, name: string): string | undefined {
  const known = ctx.models.names[name];
  if (known !== undefined) return known;
  if (ctx.models.unknown === 'default') return ctx.defaults.model;
  throw new OpenAiError(
    404,
    `The model '${name}' does not exist or you do not have access to it. Models this gateway runs: ${Object.keys(ctx.models.names).join(', ')}`,
    { code: 'model_not_found', param: 'model' },
  );
}

/** `GET /models`: every name a request may use, as OpenAI lists models. */
export function modelList(ctx: RouteContext) {
  return {
    object: 'list' as const,
    data: Object.keys(ctx.models.names)
      .sort()
      .map((id) => modelObject(id)),
  };
}

export function modelObject(id: string) {
  return { id, object: 'model' as const, created: 0, owned_by: 'sessionlog' };
}

/** `GET /models/:id`: a name requests may use (404 for any other). */
export function modelById(ctx: RouteContext, id: string) {
  if (ctx.models.names[id] === undefined)
    throw notFound('model', `The model '${id}' does not exist or you do not have access to it.`);
  return modelObject(id);
}
