// The message line: an action's outcome, or an error in the user's words
// (status.js decides them); a "started" note goes once its run ends.
import { ApiError } from './api-client.js';
import { $, contextFor, portal, state } from './page.js';
import { errorMessage, runView } from './status.js';

/** Shows an action's outcome; `runId`: a "started" note that goes once that run ends. */
export function say(text, { error = false, code = null, runId = null } = {}) {
  state.message = { text, error, code, runId };
  renderMessage();
}

export function sayError(e) {
  if (!(e instanceof ApiError)) return say(String(e.message ?? e), { error: true });
  const text = errorMessage(e.code, { authKind: portal()?.authKind, retryAfter: e.retryAfter ?? e.details?.retryAfterSeconds, fieldErrors: e.details?.fieldErrors });
  say(text, { error: true, code: e.code });
}

export function renderMessage() {
  const m = $('message');
  const msg = state.message;
  if (msg?.runId) {
    const d = state.details.get(msg.runId);
    if (d && runView(d.run, d.jobs, contextFor(d.run)).finished) state.message = null;
  }
  const cur = state.message;
  m.className = cur?.error ? 'error' : '';
  m.replaceChildren();
  if (!cur) return;
  m.append(document.createTextNode(cur.text));
  if (cur.code) m.append(Object.assign(document.createElement('span'), { className: 'code', textContent: cur.code, title: 'Error code (for support)' }));
}

