/**
 * Whether a model takes the media of a message (issue 50): the boundary's check, made before a
 * turn with the routed model's catalogue entry, so a model that cannot take an image or a file
 * gets a clear 4xx instead of a provider error at turn time. Pure.
 */
import { SessionlogError } from '../session/errors.js';
import type { ModelInputs } from './catalogue.js';

/** What to do with a medium the model cannot take: refuse the message, or send a stand-in (`SESSIONLOG_MEDIA_UNSUPPORTED`). */
export type UnsupportedMedia = 'refuse' | 'stand-in';

/**
 * Refuses (`MEDIA_NOT_SUPPORTED`, with `part` the index of the first such part in `parts`) a
 * message whose image or file parts `model` cannot take, unless `unsupported` is `stand-in`
 * (then the request carries a text stand-in for them: context/media-policy.ts). `parts` are the
 * message's content as the caller sent it or as stored (anything with a `type`).
 */
export function checkMediaSupported(
  model: { id: string; input: ModelInputs },
  parts: readonly { type: string }[],
  unsupported: UnsupportedMedia,
): void {
  if (unsupported === 'stand-in') return;
  const index = parts.findIndex(
    (part) => (part.type === 'image' && !model.input.image) || (part.type === 'file' && !model.input.file),
  );
  if (index < 0) return;
  const kind = parts[index]!.type === 'image' ? 'images' : 'files';
  throw new SessionlogError(
    'MEDIA_NOT_SUPPORTED',
    `content[${index}]: model ${JSON.stringify(model.id)} does not take ${kind}; send it to a model that does (the model catalogue's input.${parts[index]!.type}), or start the worker with SESSIONLOG_MEDIA_UNSUPPORTED=stand-in to send a text stand-in instead`,
    { part: index },
  );
}
