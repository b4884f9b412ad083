// The inspector's shell: the token prompt, the hash router (#/ and #/sessions/<id>) and the header.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { UNAUTHORIZED_EVENT, api, authMode, forgetToken, storeToken, storedToken } from './api.js';
import { html } from './format.js';
import { SessionList } from './sessions.js';
import { SessionView } from './session.js';

function parseRoute() {
  const match = /^#\/sessions\/([^/]+)$/.exec(window.location.hash);
  return match ? { name: 'session', id: decodeURIComponent(match[1]) } : { name: 'list' };
}

function TokenPrompt({ refused, onToken }) {
  const [value, setValue] = useState('');
  const [checking, setChecking] = useState(false);
  const [error, setError] = useState(refused);
  const submit = async (event) => {
    event.preventDefault();
    if (!value.trim()) return;
    setChecking(true);
    storeToken(value.trim());
    try {
      await api('/v1/sessions');
      onToken();
    } catch (failure) {
      forgetToken();
      setError(failure.status === 401 ? 'The gateway refused this token.' : failure.message);
    } finally {
      setChecking(false);
    }
  };
  return html` <main class="token-prompt" data-testid="token-prompt">
    <h1>sessionlog inspector</h1>
    <p>This gateway needs its token (<code>SESSIONLOG_GATEWAY_TOKEN</code>). It stays in this tab only.</p>
    <form onSubmit=${submit}>
      <label
        >Gateway token
        <input
          type="password"
          name="token"
          autocomplete="off"
          value=${value}
          onInput=${(e) => setValue(e.currentTarget.value)}
      /></label>
      <button type="submit" disabled=${checking}>Open</button>
    </form>
    ${error ? html`<p class="error" data-testid="token-error">${error}</p>` : null}
  </main>`;
}

function App() {
  const [route, setRoute] = useState(parseRoute);
  const [authorized, setAuthorized] = useState(authMode === 'none' || storedToken() !== null);
  const [refused, setRefused] = useState(null);

  useEffect(() => {
    const onHash = () => setRoute(parseRoute());
    const onUnauthorized = (event) => {
      if (authMode !== 'bearer') return;
      forgetToken();
      setRefused(event.detail ?? 'The gateway refused the token.');
      setAuthorized(false);
    };
    window.addEventListener('hashchange', onHash);
    window.addEventListener(UNAUTHORIZED_EVENT, onUnauthorized);
    return () => {
      window.removeEventListener('hashchange', onHash);
      window.removeEventListener(UNAUTHORIZED_EVENT, onUnauthorized);
    };
  }, []);

  if (!authorized) {
    return html`<${TokenPrompt}
      refused=${refused}
      onToken=${() => {
        setRefused(null);
        setAuthorized(true);
      }}
    />`;
  }
  const signOut = () => {
    forgetToken();
    setRefused(null);
    setAuthorized(false);
  };
  return html` <div class="shell">
    <nav class="topbar">
      <a href="#/" class="brand">sessionlog <span>inspector</span></a>
      ${route.name === 'session' ? html`<span class="crumb">/ <a href="#/">sessions</a> / <strong>${route.id}</strong></span>` : null}
      <span class="spacer"></span>
      ${authMode === 'bearer' ? html`<button class="link" onClick=${signOut}>forget token</button>` : null}
    </nav>
    ${route.name === 'session' ? html`<${SessionView} key=${route.id} id=${route.id} />` : html`<${SessionList} />`}
  </div>`;
}

// Preact renders beside what the element holds: the page's "Loading the inspector…" goes first.
const root = document.getElementById('app');
root.replaceChildren();
render(html`<${App} />`, root);
