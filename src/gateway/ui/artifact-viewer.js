// A stored artifact (spilled tool output), paged from its documented route.
import { useEffect, useState } from 'preact/hooks';
import { api, sessionPath } from './api.js';
import { formatNumber, html } from './format.js';

const ARTIFACT_PAGE = 20000;

export function ArtifactViewer({ artifact, onClose }) {
  const [offset, setOffset] = useState(0);
  const [page, setPage] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let stopped = false;
    api(
      `${sessionPath(artifact.sessionId)}/artifacts/${encodeURIComponent(artifact.name)}?offset=${offset}&limit=${ARTIFACT_PAGE}`,
    )
      .then((answer) => !stopped && setPage(answer))
      .catch((failure) => !stopped && setError(failure.message));
    return () => {
      stopped = true;
    };
  }, [artifact, offset]);
  return html` <div class="overlay" onClick=${(e) => e.target === e.currentTarget && onClose()}>
    <div class="viewer panel" role="dialog" aria-label="artifact" data-testid="artifact-viewer">
      <header>
        <strong>${artifact.locator}</strong>
        <span class="muted" data-testid="artifact-range"
          >${page ? `characters ${formatNumber(page.offset)}–${formatNumber(page.offset + page.text.length)} of ${formatNumber(page.total)}` : 'loading…'}</span
        >
        <span class="spacer"></span>
        <button disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - ARTIFACT_PAGE))}>
          previous page
        </button>
        <button
          data-testid="artifact-next"
          disabled=${!page || page.offset + page.text.length >= page.total}
          onClick=${() => setOffset(offset + ARTIFACT_PAGE)}
        >
          next page
        </button>
        <button onClick=${onClose}>close</button>
      </header>
      ${error ? html`<p class="error">${error}</p>` : null}
      <pre data-testid="artifact-text">${page?.text ?? ''}</pre>
    </div>
  </div>`;
}
