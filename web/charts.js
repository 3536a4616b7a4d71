// Small inline-SVG charts for the page (no dependencies): a line chart of one
// or more series over time, with an optional limit line. Drawn at its box's
// width (opts.width, in CSS pixels), so its text keeps its size on a 390 px
// phone and on a wide operator screen.
import { $, state } from './page.js';
import { duration, limitPer10s, plural, requestPoints, runSpan, throughputSeries, when } from './status.js';

const NS = 'http://www.w3.org/2000/svg';
const H = 150;
const PAD = { l: 44, r: 10, t: 12, b: 22 };

const el = (name, attrs = {}, text) => {
  const n = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
  if (text !== undefined) n.textContent = text;
  return n;
};

const nice = (v) => {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 4, 5, 6, 8, 10].map((m) => m * p).find((x) => x >= v) ?? 10 * p;
};
const fmt = (v) => (v >= 1000 ? `${+(v / 1000).toFixed(1)}k` : v >= 10 ? v.toFixed(0) : v.toFixed(1).replace(/\.0$/, ''));

/**
 * series: [{ label, color, points: [{ t, v }] }] (t in ms); opts: { width,
 * limit?: { v, label }, empty: text shown without data, xLabel(t0, t1) }.
 * Returns an <svg> element.
 */
export function lineChart(series, opts = {}) {
  const W = Math.max(240, Math.round(opts.width || 600));
  const svg = el('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', class: 'chart' });
  svg.setAttribute('aria-label', opts.title ?? 'chart');
  const all = series.flatMap((s) => s.points);
  if (all.length < 2 || all.every((p) => !p.v) && !opts.limit) {
    svg.append(el('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'chart-empty' }, opts.empty ?? 'No data yet'));
    return svg;
  }
  const t0 = Math.min(...all.map((p) => p.t));
  const t1 = Math.max(...all.map((p) => p.t));
  const top = nice(Math.max(...all.map((p) => p.v), opts.limit?.v ?? 0, 0.1) * 1.1);
  const x = (t) => PAD.l + ((t - t0) / Math.max(1, t1 - t0)) * (W - PAD.l - PAD.r);
  const y = (v) => H - PAD.b - (Math.max(0, v) / top) * (H - PAD.t - PAD.b);
  for (const f of [0, 0.5, 1]) {
    svg.append(el('line', { x1: PAD.l, x2: W - PAD.r, y1: y(top * f), y2: y(top * f), class: 'chart-grid' }));
    svg.append(el('text', { x: PAD.l - 6, y: y(top * f) + 4, 'text-anchor': 'end', class: 'chart-axis' }, fmt(top * f)));
  }
  if (opts.limit) {
    svg.append(el('line', { x1: PAD.l, x2: W - PAD.r, y1: y(opts.limit.v), y2: y(opts.limit.v), class: 'chart-limit' }));
    svg.append(el('text', { x: W - PAD.r - 4, y: y(opts.limit.v) - 4, 'text-anchor': 'end', class: 'chart-limit-label' }, opts.limit.label));
  }
  for (const s of series) {
    if (s.points.length < 2) continue;
    const d = s.points.map((p, i) => `${i ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join('');
    svg.append(el('path', { d: `${d}L${x(s.points[s.points.length - 1].t).toFixed(1)},${y(0)}L${x(s.points[0].t).toFixed(1)},${y(0)}Z`, fill: s.color, 'fill-opacity': 0.12, stroke: 'none' }));
    svg.append(el('path', { d, fill: 'none', stroke: s.color, 'stroke-width': 2, 'stroke-linejoin': 'round', class: 'chart-line' }));
  }
  const [left, right] = opts.xLabel ? opts.xLabel(t0, t1) : ['', ''];
  svg.append(el('text', { x: PAD.l, y: H - 6, class: 'chart-axis' }, left));
  svg.append(el('text', { x: W - PAD.r, y: H - 6, 'text-anchor': 'end', class: 'chart-axis' }, right));
  return svg;
}

/** A legend line for the series of a chart. */
export function legend(items) {
  const div = document.createElement('div');
  div.className = 'legend';
  for (const { label, color } of items) {
    const s = document.createElement('span');
    const dot = document.createElement('i');
    dot.style.background = color;
    s.append(dot, document.createTextNode(label));
    div.append(s);
  }
  return div;
}

// ---------- a run's charts ----------

/** A chart drawn at its box's width. */
function chartIn(id, series, opts) {
  const box = $(id);
  box.replaceChildren(lineChart(series, { ...opts, width: box.clientWidth }));
}

export function renderCharts(d, now, finished) {
  const { run, jobs, hubspotLimits } = d;
  const series = throughputSeries(jobs, state.samples, now, 30);
  // Both charts span the run as its header says (its elapsed time), whatever their first and last point.
  const { from, to } = runSpan(run, now, jobs);
  const rel = () => ['0 s', duration((to - from) / 1000)];
  chartIn('chart-throughput',
    [{ label: 'items/s', color: '#0969da', points: series.map((p) => ({ t: p.t, v: p.items })) }],
    { title: 'Throughput in items per second', empty: finished ? 'Nothing was transferred' : 'Starts when the first content type does', xLabel: rel },
  );
  const text = [];
  if (run.kind === 'export') {
    chartIn('chart-budget', [], { empty: 'Exports read your database only: no HubSpot requests' });
  } else {
    // The budget's own count per 10-s window (every request sent for the portal), against its learned limit.
    const per10s = state.requests?.limitPer10s ?? limitPer10s(hubspotLimits);
    const windows = (state.requests?.portalId === run.portalId ? state.requests.windows : []) ?? [];
    const points = requestPoints(windows, from, to);
    const inRun = windows.filter((w) => Date.parse(w.windowStart) + 10_000 > from && Date.parse(w.windowStart) <= to).reduce((n, w) => n + w.requests, 0);
    const box = $('chart-budget');
    box.dataset.max = String(Math.max(0, ...points.map((p) => p.v)));
    box.dataset.total = String(inRun);
    chartIn('chart-budget',
      [{ label: 'requests', color: '#bc4c00', points }],
      { title: 'HubSpot requests per 10 seconds', limit: per10s ? { v: per10s, label: `HubSpot's limit ${Math.round(per10s)}` } : null, empty: 'No HubSpot requests yet', xLabel: rel },
    );
    text.push(`${plural(inRun, 'request')} to HubSpot for this portal during this sync`);
    if (hubspotLimits?.dailyLimit) {
      text.push(`HubSpot's daily quota: ${(hubspotLimits.dailyRemaining ?? hubspotLimits.dailyLimit).toLocaleString()} of ${hubspotLimits.dailyLimit.toLocaleString()} left as of its last answer${hubspotLimits.dailyResetsAt ? ` (resets ${when(hubspotLimits.dailyResetsAt, now)})` : ''}`);
    }
  }
  $('budget-text').textContent = text.join(' · ');
}
