// The message lines: an action's outcome, or an error in the user's words
// (status.js decides them), each shown where the action was taken: the Sync
// view's portal card, its schedule card, and the Operator view (a line kept
// in sight at the bottom of the view). A "started" note goes once its run ends.
import { ApiError } from './api-client.js';
import { $, contextFor, portal, state } from './page.js';
import { errorMessage, runView } from './status.js';

/** Where each place's line is: the Sync view's, its schedule card's, the Operator view's. */
const LINES = { sync: 'message', schedule: 'schedule-message', operator: 'ops-message' };

/** Shows an action's outcome in `place`'s line; `runId`: a "started" note that goes once that run ends. */
export function say(text, { error = false, code = null, runId = null, place = 'sync' } = {}) {
  state.messages[place] = { text, error, code, runId };
  renderMessage();
}

/**
 * An action's error in `place`'s line, in the user's words. `own`: show the API's own message (the
 * Operator view's: operators act on the queue and read what the API says, e.g. why a retry was refused).
 */
export function sayError(e, { place = 'sync', own = false } = {}) {
  if (!(e instanceof ApiError)) return say(String(e?.message ?? e), { error: true, place });
  const text = own && e.message
    ? e.message
    : errorMessage(e.code, { authKind: portal()?.authKind, retryAfter: e.retryAfter ?? e.details?.retryAfterSeconds, fieldErrors: e.details?.fieldErrors });
  say(text, { error: true, code: e.code, place });
}

export function renderMessage() {
  for (const [place, id] of Object.entries(LINES)) {
    const m = $(id);
    if (!m) continue;
    const msg = state.messages[place];
    if (msg?.runId) {
      const d = state.details.get(msg.runId);
      if (d && runView(d.run, d.jobs, contextFor(d.run)).finished) state.messages[place] = null;
    }
    const cur = state.messages[place];
    m.className = cur?.error ? 'error' : '';
    m.hidden = place !== 'sync' && !cur; // the Sync view's line keeps its place; the others take none while empty
    m.replaceChildren();
    if (!cur) continue;
    m.append(document.createTextNode(cur.text));
    if (cur.code) m.append(Object.assign(document.createElement('span'), { className: 'code', textContent: cur.code, title: 'Error code (for support)' }));
  }
}
