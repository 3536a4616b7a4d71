// The Operator view, for the team running the queue: queue_stats as tiles,
// tables and the last hour's chart. Shown only to operators (the stats
// answer NOT_AN_OPERATOR to everyone else); `setView` is app.js's.
import { legend, lineChart } from './charts.js';
import { $, div, node, state } from './page.js';
import { ago, duration } from './status.js';
import { STOP_REASONS } from './stop-reasons.js';

function table(cols, rows, empty = 'none') {
  if (!rows.length) return node('p', { className: 'muted', textContent: empty });
  const t = node('table');
  t.append(node('tr', {}, ...cols.map((c) => node('th', { className: c.cls ?? '', textContent: c.label }))));
  for (const r of rows) t.append(node('tr', {}, ...cols.map((c, i) => node('td', { className: c.cls ?? '', textContent: r[i] ?? '' }))));
  return div('scroll', t); // a table wider than a phone scrolls inside its card, not the page
}

export function renderOperator(setView) {
  const s = state.stats;
  $('tabs').hidden = !s;
  if (!s) {
    if (state.view === 'operator') setView('sync');
    return;
  }
  const now = Date.now();
  const sum = (kind, status) => s.by_kind_and_status.filter((x) => (!kind || x.kind === kind) && x.status === status).reduce((n, x) => n + x.jobs, 0);
  $('ops-updated').textContent = `updated ${ago(new Date(state.statsAt).toISOString(), now)}`;
  const tiles = [
    ['unfinished-runs', s.unfinished_runs, 'unfinished runs'],
    ['pending', sum(null, 'pending'), 'jobs pending'],
    ['running', sum(null, 'running'), 'jobs running'],
    ['oldest-pending', s.oldest_pending_age_seconds === null ? '—' : duration(s.oldest_pending_age_seconds), 'oldest pending job waits'],
    ['failed-hour', s.failed_last_hour, 'failed in the last hour'],
  ];
  $('ops-tiles').replaceChildren(...tiles.map(([key, v, label]) => {
    const t = div('tile', node('b', { textContent: String(v) }), node('span', { textContent: label }));
    t.dataset.key = key;
    t.dataset.value = String(v);
    return t;
  }));
  const statuses = ['pending', 'running', 'completed', 'failed', 'stopped'];
  const kinds = [...new Set(['fetch', 'export', ...s.by_kind_and_status.map((x) => x.kind)])];
  const depth = table(
    [{ label: 'kind' }, ...statuses.map((st) => ({ label: st, cls: 'num' }))],
    kinds.map((k) => [k, ...statuses.map((st) => String(sum(k, st)))]),
  );
  $('ops-depth').replaceChildren(depth, node('p', { className: 'muted', textContent: 'completed, failed, stopped: in the last hour' }));
  $('ops-portals').replaceChildren(table(
    [{ label: 'portal' }, { label: 'running', cls: 'num' }],
    s.running_per_portal.map((p) => [p.name, String(p.running)]),
    'No job is running.',
  ));
  for (const [i, p] of s.running_per_portal.entries()) $('ops-portals').querySelectorAll('tr')[i + 1].dataset.portalId = p.portal_id;
  // Per-portal HubSpot budget with its history, and the failures with portal and run: operator-actions.js.
  const hour = s.last_hour ?? [];
  $('ops-chart').replaceChildren(
    lineChart([
      { label: 'jobs completed', color: '#1a7f37', points: hour.map((m) => ({ t: Date.parse(m.minute), v: m.completed })) },
      { label: 'jobs failed', color: '#cf222e', points: hour.map((m) => ({ t: Date.parse(m.minute), v: m.failed })) },
    ], { width: $('ops-chart').clientWidth, title: 'Jobs completed and failed per minute, the last hour', xLabel: () => ['60 min ago', 'now'], empty: 'Nothing in the last hour' }),
    // Invocations would flatten the jobs: counted below, from their per-minute aggregate.
    legend([{ label: 'jobs completed', color: '#1a7f37' }, { label: 'jobs failed', color: '#cf222e' }]),
  );
  renderInvocationCounts(s.invocations_last_hour);
  $('ops-invocations').replaceChildren(table(
    [{ label: 'ended' }, { label: 'source', cls: 'wide' }, { label: 'took', cls: 'num' }, { label: 'claimed', cls: 'num' }, { label: 'done', cls: 'num' },
      { label: 'released', cls: 'num wide' }, { label: 'failed', cls: 'num' }, { label: 'CPU', cls: 'num wide' }, { label: 'stopped because' }],
    idleGrouped(s.recent_invocations).slice(0, 12).map((i) => [
      ago(i.ended_at, now) + (i.idle > 1 ? ` (${i.idle} idle in a row)` : ''), i.source, duration((Date.parse(i.ended_at) - Date.parse(i.started_at)) / 1000),
      String(i.claimed), String(i.completed),
      String(i.released), String(i.failed), i.cpu_ms === null ? '—' : `${i.cpu_ms} ms`,
      (STOP_REASONS[i.stop_reason] ?? i.stop_reason) + (i.shutdown_reason ? ` (${i.shutdown_reason})` : ''),
    ]),
    'No invocation in the last hour.',
  ));
}

/**
 * Every worker invocation of the last 60 minutes (queue_stats' invocations_last_hour, counted per minute in
 * the database, not the log's newest rows): how many, since when, and by source and stop reason.
 */
function renderInvocationCounts(w) {
  const box = $('ops-invocation-window');
  if (!w) {
    box.textContent = '';
    $('ops-invocation-counts').replaceChildren();
    return;
  }
  const since = new Date(w.since).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  box.dataset.invocations = String(w.invocations);
  box.dataset.minutes = String(w.minutes);
  box.replaceChildren(
    node('span', {}, node('b', { id: 'ops-invocations-total', textContent: w.invocations.toLocaleString() }), ` worker invocations in the last ${w.minutes} min (since ${since})`),
    node('span', {}, node('b', { textContent: w.claimed.toLocaleString() }), ' jobs claimed'),
    node('span', {}, node('b', { textContent: w.completed.toLocaleString() }), ' completed'),
    w.failed ? node('span', { className: 'tone-bad' }, node('b', { textContent: w.failed.toLocaleString() }), ' failed') : null,
  );
  $('ops-invocation-counts').replaceChildren(table(
    [{ label: 'source' }, { label: 'stopped because' }, { label: 'invocations', cls: 'num' }, { label: 'claimed', cls: 'num' }],
    w.by_source.map((b) => [b.source, STOP_REASONS[b.stop_reason] ?? b.stop_reason, b.invocations.toLocaleString(), b.claimed.toLocaleString()]),
    `No invocation in the last ${w.minutes} min (the worker is woken each minute by cron: none means cron is not running).`,
  ));
}

/** Invocations newest first, runs of idle ones (nothing claimed, queue empty) folded into their newest. */
function idleGrouped(invocations) {
  const out = [];
  for (const i of invocations) {
    const idle = i.claimed === 0 && i.stop_reason === 'queue_empty';
    const prev = out[out.length - 1];
    if (idle && prev?.idle) prev.idle++;
    else out.push({ ...i, idle: idle ? 1 : 0 });
  }
  return out;
}

