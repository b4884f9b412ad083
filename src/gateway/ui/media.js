// Images and files of a message (issue 50): a stored image as a thumbnail read from the native
// media route with the inspector's token, a stored file as a chip naming it with its type and
// size, a remote image as its URL only (the inspector never loads another host: privacy).
import { useEffect, useState } from 'preact/hooks';
import { storedToken } from './api.js';
import { formatNumber, html } from './format.js';

/** `artifact:<sessionId>/<name>` → `{sessionId, name}`, or null for anything else. */
export function parseLocator(locator) {
  const match = /^artifact:(.+)\/([^/]+)$/.exec(locator ?? '');
  return match ? { sessionId: match[1], name: match[2] } : null;
}

/** The native route giving a stored medium's bytes. */
export function mediaPath(locator) {
  const parsed = parseLocator(locator);
  if (!parsed) return null;
  return `/v1/sessions/${encodeURIComponent(parsed.sessionId)}/media/${encodeURIComponent(parsed.name)}`;
}

export function formatBytes(bytes) {
  if (typeof bytes !== 'number') return '';
  if (bytes >= 1024 * 1024) return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${formatNumber(bytes)} B`;
}

/** The image and file blocks among a message's content blocks (a tool result's: its inner blocks). */
export function mediaBlocksOf(content) {
  const found = [];
  for (const block of content ?? []) {
    if (block?.type === 'image' || block?.type === 'file') found.push(block);
    else if (block?.type === 'tool-result') found.push(...mediaBlocksOf(block.content));
  }
  return found;
}

/** A blob as a `data:` URL (the page's content security policy allows images from 'self' and data: only). */
function dataUrlOf(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error ?? new Error('the image could not be read'));
    reader.readAsDataURL(blob);
  });
}

/**
 * The bytes of a stored medium as a `data:` URL: an <img> cannot send the bearer token, so the
 * page fetches the bytes as its other requests do and shows them from memory.
 */
function useMediaUrl(locator) {
  const [state, setState] = useState({ url: null, error: null });
  useEffect(() => {
    const path = mediaPath(locator);
    if (!path) {
      setState({ url: null, error: 'not a stored medium' });
      return undefined;
    }
    let stopped = false;
    const headers = {};
    const token = storedToken();
    if (token) headers.authorization = `Bearer ${token}`;
    fetch(path, { headers })
      .then(async (response) => {
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        const url = await dataUrlOf(await response.blob());
        if (!stopped) setState({ url, error: null });
      })
      .catch((failure) => !stopped && setState({ url: null, error: failure.message }));
    return () => {
      stopped = true;
    };
  }, [locator]);
  return state;
}

function Thumbnail({ block }) {
  const source = block.source;
  const { url, error } = useMediaUrl(source.locator);
  const size = source.width && source.height ? `${source.width}×${source.height}` : '';
  const title = [source.mediaType, size, formatBytes(source.bytes), source.locator].filter(Boolean).join(' · ');
  return html`<figure class="media-thumb" data-testid="media-image" data-locator=${source.locator} title=${title}>
    ${
      url
        ? html`<img src=${url} alt=${`image ${size}`} data-testid="media-thumbnail" />`
        : html`<div class="media-placeholder">${error ? `unreadable: ${error}` : 'loading…'}</div>`
    }
    <figcaption class="muted">
      ${source.mediaType.replace('image/', '')}${size ? ` ${size}` : ''} · ${formatBytes(source.bytes)}
    </figcaption>
  </figure>`;
}

function RemoteImage({ block }) {
  // Shown as text only: loading it would tell the other host who looks at this session.
  return html`<div
    class="media-chip remote"
    data-testid="media-remote"
    title="a remote image, not loaded by the inspector"
  >
    <span class="media-kind">image URL</span> <code>${block.source.url}</code>
  </div>`;
}

function FileChip({ block }) {
  const source = block.source;
  return html`<div class="media-chip" data-testid="media-file" data-locator=${source.locator} title=${source.locator}>
    <span class="media-kind">file</span>
    <strong data-testid="media-file-name">${block.filename ?? source.locator.split('/').pop()}</strong>
    <span class="muted" data-testid="media-file-facts">${source.mediaType} · ${formatBytes(source.bytes)}</span>
  </div>`;
}

/** The media of a message's content blocks, or nothing when it has none. */
export function MediaBlocks({ content }) {
  const blocks = mediaBlocksOf(content);
  if (blocks.length === 0) return null;
  return html`<div class="media" data-testid="media">
    ${blocks.map((block, i) => {
      if (block.type === 'file') return html`<${FileChip} key=${i} block=${block} />`;
      if (block.source?.kind === 'url') return html`<${RemoteImage} key=${i} block=${block} />`;
      return html`<${Thumbnail} key=${i} block=${block} />`;
    })}
  </div>`;
}
