// The page's state and what every view shares: the one state object, the
// DOM helpers, and how a run is seen (its context in the portal, its view).
// Imports no other page module but status.js, so every view can import it.
import { runView } from './status.js';

export const $ = (id) => document.getElementById(id);
export const state = {
  cfg: null, // see loadConfig
  supabase: null, // supabase-js client (deployed only)
  token: null,
  portals: [],
  portalId: null,
  runs: [], // the first page of the portal's runs, newest first
  olderRuns: [], // pages loaded with "Older"
  runsCursor: null,
  details: new Map(), // run id -> { run, jobs, hubspotLimits }; finished runs are not fetched again
  samples: new Map(), // job id -> [{ t, done, pages }] as seen by this page
  runId: null, // the run on screen (null: the overview)
  stats: null, // queue_stats (operators), undefined until known, false when not an operator
  counts: null, // { portalId, items: Map type -> live items stored }: GET /content, read on load and when a fetch ends
  countsKey: null, // the latest fetch job or run end the counts were read after
  view: 'sync',
  // Each place's message line (messages.js): { text, error, code, runId }, runId set for "started" messages, cleared when that run ends.
  messages: { sync: null, schedule: null, operator: null },
  channel: null,
  realtime: 'off', // 'off' | 'connecting' | 'live' | 'failed'
  refreshes: 0,
  refreshing: null, // the refresh under way (a promise)
  again: null, // a promise for the refresh asked for meanwhile
  againResolve: null,
  timer: null,
};

export const portal = (id = state.portalId) => state.portals.find((p) => p.id === id);

export const activeDetails = () => [...state.details.values()].filter((d) => d.run.portalId === state.portalId && !d.run.finishedAt);

/** What a run's jobs need to know of the rest of the portal: which types a fetch is still working on. */
export function contextFor(run) {
  const fetchInFlight = new Set();
  for (const d of state.details.values()) {
    if (d.run.portalId !== run.portalId || d.run.kind !== 'fetch' || d.run.finishedAt) continue;
    for (const j of d.jobs) if (j.status === 'pending' || j.status === 'running') fetchInFlight.add(j.contentType);
  }
  return { fetchInFlight, authKind: portal(run.portalId)?.authKind };
}

/** The run as every view shows it. */
export function viewOf(run) {
  const d = state.details.get(run.id);
  const r = d?.run ?? run;
  return { run: r, jobs: d?.jobs ?? null, view: runView(r, d?.jobs ?? null, contextFor(r)) };
}

export const node = (tag, props = {}, ...children) => {
  const n = Object.assign(document.createElement(tag), props);
  for (const c of children) if (c !== null && c !== undefined) n.append(c);
  return n;
};
export const div = (className, ...children) => node('div', { className }, ...children);
export const fmtRate = (r) => (r === null ? '—' : `${r >= 10 ? Math.round(r).toLocaleString() : r.toFixed(1)}/s`);
export const count = (done, total) => `${done.toLocaleString()} / ${total === null ? '?' : total.toLocaleString()}`;

// Clickable nodes kept across renders (the same node, its handler the latest render's): a refresh
// that replaced one between the press and the release of a click would lose the click.
const keptNodes = new Map();
export function kept(key, tag, onclick = null) {
  let el = keptNodes.get(key);
  if (!el) keptNodes.set(key, (el = document.createElement(tag)));
  el.onclick = onclick;
  return el;
}
export const keptButton = (key, onclick) => kept(key, 'button', onclick);

