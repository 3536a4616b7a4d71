// The Operator view's working half: every user's jobs filtered by state,
// portal, kind and time (GET /orchestrator/operator/jobs), one job's details
// with Retry and Stop, every portal with Pause / Resume and its HubSpot
// requests per 10 s with their history (GET /orchestrator/operator/portals,
// /operator/requests). Shown to operators only. `init` is given the page's API
// call, a function that refreshes everything after an action, and the Operator
// view's own message line (say, sayError: an action's outcome shows in this view).
import { lineChart } from './charts.js';
import { ago, duration, typeLabel } from './status.js';

const $ = (id) => document.getElementById(id);
const node = (tag, { dataset, ...props } = {}, ...children) => {
  const n = Object.assign(document.createElement(tag), props);
  Object.assign(n.dataset, dataset ?? {});
  for (const c of children) if (c !== null && c !== undefined) n.append(c);
  return n;
};
const SINCE = { hour: 3_600_000, day: 86_400_000, week: 7 * 86_400_000, all: null };

const ops = {
  api: null,
  refreshAll: null,
  say: null,
  sayError: null,
  filters: { status: 'failed', portalId: '', kind: '', since: 'day' },
  jobs: [],
  nextBeforeId: null,
  portals: [],
  jobId: null, // the job whose details are open
  historyPortalId: null,
  history: [],
  busy: false,
};

export function initOperatorActions({ api, refreshAll, say, sayError }) {
  Object.assign(ops, { api, refreshAll, say, sayError });
  for (const [id, key] of [['ops-filter-status', 'status'], ['ops-filter-portal', 'portalId'], ['ops-filter-kind', 'kind'], ['ops-filter-since', 'since']]) {
    $(id).onchange = () => {
      ops.filters[key] = $(id).value;
      ops.jobId = null;
      refreshAll();
    };
  }
}

/** One read of the operator data (the page's refresh loop calls it with the stats). */
export async function loadOperatorActions() {
  const f = ops.filters;
  const q = new URLSearchParams({ limit: '50' });
  if (f.status) q.set('status', f.status);
  if (f.portalId) q.set('portalId', f.portalId);
  if (f.kind) q.set('kind', f.kind);
  if (SINCE[f.since]) q.set('since', new Date(Date.now() - SINCE[f.since]).toISOString());
  const [jobs, portals] = await Promise.all([ops.api(`/operator/jobs?${q}`), ops.api('/operator/portals')]);
  ops.jobs = jobs.jobs;
  ops.nextBeforeId = jobs.nextBeforeId;
  ops.portals = portals.portals;
  ops.historyPortalId ??= ops.portals.find((p) => p.requestsLastHour > 0)?.portalId ?? ops.portals[0]?.portalId ?? null;
  if (ops.historyPortalId) {
    const since = new Date(Date.now() - 3_600_000).toISOString();
    ops.history = (await ops.api(`/operator/requests?${new URLSearchParams({ portalId: ops.historyPortalId, since })}`)).windows;
  }
}

async function act(body, done) {
  if (ops.busy) return;
  ops.busy = true;
  try {
    await ops.api('', { method: 'POST', body });
    ops.say(done);
  } catch (e) {
    ops.sayError(e); // the API's own words and code, e.g. why a retry was refused
  } finally {
    ops.busy = false;
  }
  await ops.refreshAll();
}

function table(cols, rows, empty, rowProps = () => ({})) {
  if (!rows.length) return node('p', { className: 'muted', textContent: empty });
  const t = node('table');
  t.append(node('tr', {}, ...cols.map((c) => node('th', { className: c.cls ?? '', textContent: c.label }))));
  rows.forEach((r, i) => t.append(node('tr', rowProps(i), ...cols.map((c, k) => {
    const v = r[k];
    return node('td', { className: c.cls ?? '' }, v instanceof Node ? v : document.createTextNode(v ?? ''));
  }))));
  return node('div', { className: 'scroll' }, t);
}

const button = (text, onclick, props = {}) => node('button', { textContent: text, onclick, ...props });

export function renderOperatorActions(now = Date.now()) {
  // Filters: the portal list follows the portals known.
  const sel = $('ops-filter-portal');
  const want = ['', ...ops.portals.map((p) => p.portalId)].join(',');
  if (sel.dataset.options !== want) {
    sel.replaceChildren(node('option', { value: '', textContent: 'every portal' }), ...ops.portals.map((p) => node('option', { value: p.portalId, textContent: p.name })));
    sel.dataset.options = want;
  }
  sel.value = ops.filters.portalId;

  $('ops-jobs').replaceChildren(table(
    [{ label: 'when' }, { label: 'portal' }, { label: 'run', cls: 'wide' }, { label: 'kind' }, { label: 'content' }, { label: 'state' }, { label: 'error', cls: 'wrap-anywhere' }],
    ops.jobs.map((j) => [
      ago(j.finishedAt ?? j.updatedAt, now), `${j.portalName}${j.portalPaused ? ' (paused)' : ''}`, `${j.runId.slice(0, 8)}${j.trigger === 'schedule' ? ' · scheduled' : ''}`,
      j.kind === 'fetch' && j.fetchMode ? `fetch (${j.fetchMode === 'incremental' ? 'changes only' : 'full'})` : j.kind,
      typeLabel(j.contentType), j.status, j.lastError ?? j.waitingReason ?? '',
    ]),
    'No job matches these filters.',
    (i) => ({ className: ops.jobs[i].id === ops.jobId ? 'active' : '', onclick: () => { ops.jobId = ops.jobs[i].id; renderOperatorActions(); }, dataset: { jobId: ops.jobs[i].id, status: ops.jobs[i].status } }),
  ));
  for (const tr of $('ops-jobs').querySelectorAll('tr[data-job-id]')) tr.style.cursor = 'pointer';
  renderJobDetail(now);

  // Pause / Resume sits in the state cell: on a phone it is under the state, never in a column off-screen.
  $('ops-portal-table').replaceChildren(table(
    [{ label: 'portal', cls: 'wrap-anywhere' }, { label: 'state' }, { label: 'pending', cls: 'num' }, { label: 'running', cls: 'num' },
      { label: 'req. 10 s', cls: 'num' }, { label: 'last hour', cls: 'num wide' }, { label: 'limit / 10 s', cls: 'num wide' }],
    ops.portals.map((p) => [
      `${p.name} (${p.hubspotPortalId})`,
      node('span', {},
        p.disconnectedAt ? 'disconnected' : p.pausedAt ? `paused ${ago(p.pausedAt, now)}: ${p.pauseReason}` : 'active',
        p.pausedAt
          ? button('Resume', () => act({ action: 'resume_portal', portalId: p.portalId }, `Resumed ${p.name}.`), { className: 'resume act', dataset: { portalId: p.portalId } })
          : button('Pause', () => act({ action: 'pause_portal', portalId: p.portalId }, `Paused ${p.name}: none of its jobs is claimed until it is resumed.`), { className: 'pause act', dataset: { portalId: p.portalId } })),
      String(p.pendingJobs), String(p.runningJobs), String(p.requestsLast10s), p.requestsLastHour.toLocaleString(),
      p.limitPer10s === null ? '—' : String(Math.round(p.limitPer10s)),
    ]),
    'No portal is connected.',
    (i) => ({ dataset: { portalId: ops.portals[i].portalId }, onclick: (e) => { if (e.target.tagName !== 'BUTTON') { ops.historyPortalId = ops.portals[i].portalId; ops.refreshAll(); } } }),
  ));

  const hp = ops.portals.find((p) => p.portalId === ops.historyPortalId);
  $('ops-history-title').textContent = hp ? `HubSpot requests per 10 s, last hour: ${hp.name}` : 'HubSpot requests per 10 s';
  const from = now - 3_600_000;
  const at = new Map(ops.history.map((w) => [Date.parse(w.windowStart), w.requests]));
  const points = [];
  for (let t = Math.floor(from / 10_000) * 10_000; t <= now; t += 10_000) points.push({ t, v: at.get(t) ?? 0 });
  const box = $('ops-history');
  box.replaceChildren(lineChart([{ label: 'requests', color: '#bc4c00', points }], {
    width: box.clientWidth, title: 'HubSpot requests per 10 s over the last hour',
    limit: hp?.limitPer10s ? { v: hp.limitPer10s, label: `limit ${Math.round(hp.limitPer10s)}` } : null,
    empty: 'No HubSpot request in the last hour', xLabel: () => ['60 min ago', 'now'],
  }));
}

function renderJobDetail(now) {
  const box = $('ops-job');
  const j = ops.jobs.find((x) => x.id === ops.jobId);
  box.hidden = !j;
  if (!j) return;
  const dl = node('dl', { className: 'facts' });
  for (const [k, v] of [
    ['job', j.id], ['run', `${j.runId} (${j.runStatus}${j.trigger === 'schedule' ? ', scheduled' : ''})`], ['portal', `${j.portalName} (HubSpot ${j.hubspotPortalId})`],
    ['kind', j.kind], ['content', typeLabel(j.contentType)], ['state', j.status], ['attempts', `${j.attempts} of ${j.maxAttempts}`],
    ['progress', `${j.done.toLocaleString()}${j.total === null ? '' : ` of ${j.total.toLocaleString()}`}`], ['created', ago(j.createdAt, now)],
    ['took', j.startedAt ? duration(((j.finishedAt ? Date.parse(j.finishedAt) : now) - Date.parse(j.startedAt)) / 1000) : '—'],
    ['waiting', j.waitingReason ?? '—'], ['last error', j.lastError ?? '—'],
  ]) dl.append(node('dt', { textContent: k }), node('dd', { className: 'wrap-anywhere', textContent: v }));
  const actions = node('div', { className: 'row' },
    j.status === 'failed' ? button('Retry', () => act({ action: 'retry_job', jobId: j.id }, `Job ${j.id} is queued again.`), { className: 'primary', id: 'ops-retry' }) : null,
    j.status === 'pending' || j.status === 'running' ? button('Stop', () => {
      if (confirm(`Stop job ${j.id} (${typeLabel(j.contentType)} of ${j.portalName})? Its run ends stopped once its other jobs end.`)) act({ action: 'stop_job', jobId: j.id }, `Job ${j.id} stopped.`);
    }, { className: 'danger', id: 'ops-stop-job' }) : null,
    button('Close', () => { ops.jobId = null; renderOperatorActions(); }),
  );
  box.replaceChildren(node('h3', { textContent: `Job ${j.id}` }), dl, actions);
}
