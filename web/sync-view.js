// The Sync view, for the people syncing their portal: the connection line,
// the portal's controls, the run on screen (its content types, charts and
// downloads), the overview of every content type and the runs list. Handlers
// that reach the refresh loop (showRun, loadDetail) are passed in by app.js.
import { api } from './api-client.js';
import { renderCharts } from './charts.js';
import { say, sayError } from './messages.js';
import { $, activeDetails, contextFor, count, div, fmtRate, kept, keptButton, node, portal, state, viewOf } from './page.js';
import {
  ago, duration, elapsedOf, fetchModeLabel, isTerminal, itemsOf, jobErrorMessage, jobView, kindLabel, lastSyncView, plural, rateAndEta, rateWindowReason, runName, runView,
  totalOf, typeLabel, TYPE_LABELS, when,
} from './status.js';

export function renderConnection() {
  const mode = state.supabase
    ? { off: 'deployed', connecting: 'connecting to realtime…', live: 'live (realtime)', failed: 'realtime unavailable: polling' }[state.realtime]
    : 'local (polling)';
  $('connection').textContent = `${state.cfg.supabaseUrl} · ${mode}`;
}

export function renderPortalControls() {
  const p = portal();
  const busy = activeDetails();
  // A disconnected portal cannot be fetched until it is connected again (its content can still be exported).
  const gone = Boolean(p?.disconnectedAt);
  $('portal-card').dataset.disconnected = String(gone);
  $('fetch-btn').disabled = !p || gone;
  $('changes-btn').disabled = !p || gone;
  $('export-btn').disabled = !p;
  $('disconnect-btn').disabled = !p || gone;
  $('disconnect-btn').hidden = !p;
  $('fetch-btn').title = gone ? 'Disconnected from HubSpot: connect it again first' : busy.some((d) => d.run.kind === 'fetch') ? 'A fetch is in progress' : 'Every item of every content type (finds deletions too)';
  $('changes-btn').title = gone ? 'Disconnected from HubSpot: connect it again first' : 'Only what changed since the last sync';
}

export function renderRun() {
  const card = $('run-card');
  const d = state.runId && state.details.get(state.runId);
  card.hidden = !d;
  if (!d) return;
  const { run, jobs } = d;
  const ctx = contextFor(run);
  const now = Date.now();
  // The portal's HubSpot rate window spent: its running jobs wait for it, whatever the rows last said.
  const rateWindowWait = run.kind === 'fetch' && !run.finishedAt ? rateWindowReason(state.requests?.rateWindow, now) : null;
  const v = runView(run, jobs, ctx);
  if (rateWindowWait && v.status === 'running') Object.assign(v, { reason: rateWindowWait });
  $('run-title').textContent = `${runName(run, now)}${run.kind === 'fetch' ? ` · ${fetchModeLabel(run.fetchMode)}` : ''}${run.trigger === 'schedule' ? ' · scheduled' : ''}`;
  const st = $('run-status');
  st.textContent = v.label;
  st.dataset.status = v.status;
  st.className = `pill tone-${v.tone}`;
  $('stop-btn').disabled = v.finished;
  $('stop-btn').hidden = v.finished;
  // A run that ended with failed types: those types again, as a new run (a probe that failed has no type to retry).
  // (A plan, publish or restore is not started again so: it is planned again from the Publish card.)
  const failedTypes = v.finished && (run.kind === 'fetch' || run.kind === 'export') ? jobs.filter((j) => j.status === 'failed' && j.contentType).length : 0;
  $('retry-failed-btn').hidden = !failedTypes || Boolean(portal(run.portalId)?.disconnectedAt && run.kind === 'fetch');
  $('retry-failed-btn').textContent = failedTypes === 1 ? 'Retry the failed type' : 'Retry failed types';

  const items = itemsOf(run, jobs);
  const done = jobs.filter((j) => j.status === 'completed').length;
  // Why types failed, in the user's words; said once above the rows when they all failed for the same reason. Only
  // types that ended failed: one retrying after a failure says so in its status, and the run until when it goes on.
  const errors = new Map(jobs.map((j) => [j.id, j.status === 'failed' ? jobErrorMessage(j.lastError, ctx) : null]));
  const distinct = [...new Set([...errors.values()].filter(Boolean))];
  const shared = distinct.length === 1 && [...errors.values()].filter(Boolean).length > 1 ? distinct[0] : null;
  const runRate = items.done && elapsedOf(run, now, jobs) > 0 ? items.done / elapsedOf(run, now, jobs) : null;
  $('run-summary').replaceChildren(...[
    node('span', {}, v.finished ? 'Took ' : 'Elapsed ', node('b', { id: 'run-elapsed', textContent: duration(v.status === 'queued' ? 0 : elapsedOf(run, now, jobs)) })),
    node('span', {}, node('b', { textContent: count(items.done, items.total) }), run.kind === 'export' ? ' rows' : ' items'),
    node('span', {}, node('b', { textContent: `${done} of ${jobs.length}` }), ' content types done'),
    runRate && !v.finished ? node('span', {}, 'average ', node('b', { textContent: fmtRate(runRate) })) : null,
    v.reason ? node('span', { id: 'run-reason', className: 'tone-wait', textContent: v.reason }) : null,
    shared ? node('span', { className: 'tone-bad job-error', textContent: shared, title: 'Why the failed content types failed' }) : null,
  ].filter(Boolean));

  const head = div('type-row head', div('', 'Content'), div('', 'Status'), div('', 'Progress'), div('num', 'Done'), div('num', 'Rate'), div('num', 'Left'), div('', ''));
  const rows = jobs.map((j) => {
    const jv = jobView(j, run.kind, ctx);
    if (rateWindowWait && jv.status === 'running') Object.assign(jv, { status: 'waiting', tone: 'wait', label: rateWindowWait[0].toUpperCase() + rateWindowWait.slice(1) });
    const { rate, eta } = rateAndEta(j, state.samples.get(j.id), now);
    const row = div('type-row');
    Object.assign(row.dataset, { type: j.contentType ?? j.kind, status: jv.status, jobId: j.id, tone: jv.tone }); // a probe has no type
    const bar = div('bar', node('div', { style: `width:${jv.pct}%` }));
    bar.title = `${jv.pct.toFixed(0)}%`;
    const action = div('action');
    if (run.kind === 'export' && j.status === 'completed' && j.result) {
      const b = keptButton(`job:${j.id}`, () => download(j));
      Object.assign(b, { className: 'download', textContent: 'Download CSV', title: `${plural(j.result.rows, 'row')}, ${(j.result.bytes / 1024).toFixed(0)} KB` });
      b.dataset.type = j.contentType;
      action.append(b);
    }
    row.append(
      div('label', typeLabel(j.contentType)),
      div(`status tone-${jv.tone}`, jv.label),
      bar,
      div('num count', count(j.done, totalOf(j))),
      div('num rate', fmtRate(rate)),
      div('num eta', j.status === 'completed' ? 'done' : eta === null || jv.status === 'waiting' ? '—' : duration(eta)),
      action,
    );
    const err = errors.get(j.id);
    if (err && !shared) row.append(node('div', { className: 'note tone-bad job-error', textContent: err, title: j.lastError }));
    if (err) row.title = j.lastError; // the worker's own words, for whoever asks support
    return row;
  });
  $('jobs').replaceChildren(head, ...rows);
  $('jobs').classList.toggle('has-actions', run.kind === 'export');
  renderCharts(d, now, v.finished);
}

/** The portal's last sync (mode, when, what changed) and next one, above the content types. */
export function renderSyncSummary(now) {
  const el = $('sync-summary');
  const s = state.portalId && state.sync;
  el.hidden = !s;
  if (!s) return;
  const parts = [];
  const last = lastSyncView(s.lastSync);
  if (last) {
    el.dataset.lastStatus = last.status;
    parts.push(node('span', {}, 'Last sync ', node('b', { textContent: ago(s.lastSync.finishedAt, now) }), ` (${last.mode}${last.scheduled ? ', scheduled' : ''}): `,
      last.status === 'completed' ? null : node('b', { id: 'sync-last-status', className: `tone-${last.tone}`, textContent: `${last.label.toLowerCase()}, ` }),
      node('b', { id: 'sync-changes', textContent: last.changes })));
  } else parts.push(node('span', {}, 'Not synced yet'));
  // A scheduled check that found nothing leaves no run, only its types' stamps (docs/decisions/0058); a run's
  // own stamps are never later than its finish (its last job's completion settles it in the same transaction).
  const checkedAt = Math.max(0, ...(s.types ?? []).map((t) => (t.lastIncrementalAt ? Date.parse(t.lastIncrementalAt) : 0)));
  if (s.lastSync && checkedAt > Date.parse(s.lastSync.finishedAt)) {
    parts.push(node('span', {}, 'checked for changes ', node('b', { id: 'sync-checked', textContent: ago(new Date(checkedAt).toISOString(), now) }), ', none since'));
  }
  const sched = s.schedule;
  // The sync in flight as the runs show it (the sync status may be a moment older than a run that just ended).
  const running = s.activeSyncRunId && !state.details.get(s.activeSyncRunId)?.run.finishedAt;
  if (running) parts.push(node('span', { className: 'tone-run', textContent: 'a sync is running' }));
  else if (s.nextSyncAt) {
    const secs = (Date.parse(s.nextSyncAt) - now) / 1000;
    parts.push(node('span', {}, 'next ', node('b', { id: 'sync-next', textContent: secs > 0 ? `in ${duration(secs)}` : 'due now' }),
      sched?.incrementalEveryMinutes ? ` (every ${duration(sched.incrementalEveryMinutes * 60)})` : ''));
  } else parts.push(node('span', { className: 'muted', textContent: sched?.paused ? 'schedule paused' : 'no sync schedule' }));
  el.replaceChildren(...parts);
}

/** The portal's content types: each one's items stored, its last fetch (and the sync working on it now), its last export. */
export function renderOverview(loadDetail) {
  const types = Object.keys(TYPE_LABELS);
  const all = [...state.runs, ...state.olderRuns].map((r) => viewOf(r));
  const now = Date.now();
  const rows = types.map((t) => {
    let current = null; // { jv, run } of an unfinished run's job
    let lastFetch = null; // { job, run }
    let lastExport = null;
    for (const { run, jobs } of all) {
      const job = jobs?.find((j) => j.contentType === t);
      if (!job) continue;
      if (!current && !isTerminal(job.status)) current = { jv: jobView(job, run.kind, contextFor(run)), run };
      if (!lastFetch && run.kind === 'fetch' && isTerminal(job.status)) lastFetch = { job, run };
      if (!lastExport && run.kind === 'export' && job.status === 'completed' && job.result) lastExport = { job, run };
    }
    // Items stored now, counted from the content (GET /content), never a job's progress: a changes-only job's
    // `done` is what it checked. Shown once the type was fetched or holds anything.
    const stored = state.counts?.portalId === state.portalId ? state.counts.items.get(t) ?? 0 : null;
    const lastOk = all.find(({ run, jobs }) => run.kind === 'fetch' && jobs?.some((j) => j.contentType === t && j.status === 'completed'));
    const okJob = lastOk?.jobs.find((j) => j.contentType === t);
    const row = div('type-row ov');
    row.dataset.type = t;
    let statusText;
    let tone = 'neutral';
    if (current) {
      const kind = kindLabel(current.run.kind);
      statusText = current.jv.label.startsWith(kind) ? current.jv.label : `${kind}: ${current.jv.label.toLowerCase()}`;
      tone = current.jv.tone;
    } else if (lastFetch) {
      const jv = jobView(lastFetch.job, 'fetch');
      statusText = lastFetch.job.status === 'completed' ? 'Up to date' : `Last fetch ${jv.label.toLowerCase()}`;
      tone = lastFetch.job.status === 'completed' ? 'ok' : jv.tone;
    } else statusText = 'Never fetched';
    row.dataset.status = current ? current.jv.status : lastFetch ? lastFetch.job.status : 'never';
    const action = div('action');
    if (lastExport) {
      const b = keptButton(`overview:${t}`, async () => download((await loadDetail(lastExport.run.id)).jobs.find((j) => j.contentType === t)));
      Object.assign(b, { className: 'download', textContent: `CSV ${when(lastExport.run.createdAt, now)}`, title: `Download the export of ${when(lastExport.run.createdAt, now)}` });
      b.dataset.type = t;
      action.append(b);
    }
    row.append(
      div('label', typeLabel(t)),
      div(`status tone-${tone}`, statusText),
      div('muted synced', okJob ? `${lastFetch?.job === okJob ? 'fetched' : 'last complete'} ${ago(okJob.finishedAt, now)}` : ''),
      Object.assign(div('num count', stored !== null && (lastFetch || stored > 0) ? plural(stored, 'item') : ''), { title: 'Items stored now (deleted ones not counted)' }),
      action,
    );
    return row;
  });
  $('overview').replaceChildren(...rows);
  renderSyncSummary(now);
  $('overview-note').textContent = !state.portalId ? 'Connect a portal to start.' : all.length ? '' : 'Nothing fetched yet: “Fetch all” copies every content type.';
}

export function renderRuns(showRun) {
  const list = [...state.runs, ...state.olderRuns];
  const now = Date.now();
  $('runs-empty').hidden = list.length > 0 || !state.portalId;
  $('runs-more').hidden = !state.runsCursor;
  $('runs-list').replaceChildren(...list.map((r) => {
    const { run, jobs, view } = viewOf(r);
    const items = itemsOf(run, jobs);
    const li = kept(`run:${run.id}`, 'li', () => showRun(run.id));
    li.className = run.id === state.runId ? 'active' : '';
    Object.assign(li.dataset, { runId: run.id, status: view.status, trigger: run.trigger ?? 'user' });
    const part = (name, props) => Object.assign(kept(`run:${run.id}:${name}`, 'span'), props);
    li.replaceChildren(
      part('name', { className: 'run-name', textContent: `${runName(run, now)}${run.kind === 'fetch' ? ` · ${fetchModeLabel(run.fetchMode)}` : ''}` }),
      part('pill', { className: `pill tone-${view.tone}`, textContent: view.label }),
      part('meta', {
        className: 'run-meta',
        textContent: [
          run.trigger === 'schedule' ? 'scheduled' : null,
          plural(run.contentTypes.length, 'content type'),
          `${items.done.toLocaleString()}${items.total !== null ? ` of ${items.total.toLocaleString()}` : ''} ${run.kind === 'export' ? 'rows' : 'items'}`,
          view.status !== 'queued' ? `${view.finished ? 'took' : 'for'} ${duration(elapsedOf(run, now, jobs))}` : null,
        ].filter(Boolean).join(' · '),
      }),
    );
    return li;
  }));
}

export async function download(job) {
  try {
    // Deployed: the GET's freshly signed Storage URL. Locally: the orchestrator streams the file to its owner.
    if (job.result.url && job.result.urlExpiresAt && Date.parse(job.result.urlExpiresAt) > Date.now() + 5000) {
      location.assign(job.result.url);
      return;
    }
    const res = await api(`/exports/${job.id}`, { raw: true });
    const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? `${job.contentType}.csv`;
    const url = URL.createObjectURL(await res.blob());
    const a = Object.assign(document.createElement('a'), { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    say(`Downloaded ${name}.`);
  } catch (e) {
    sayError(e);
  }
}

