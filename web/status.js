// The page's one status model, and the words it shows people: every view (the
// run header, the per-type rows, the runs list, the content overview and the
// operator view) asks this module, so they cannot disagree. Pure functions of
// the HTTP API's Run and Job (camelCase; realtime rows are mapped to them in
// app.js), no DOM. Unit-tested by tests/web-status.test.ts against fixtures.

/** What the user sees for each content type (the API's names are snake_case). */
export const TYPE_LABELS = {
  site_pages: 'Site pages',
  landing_pages: 'Landing pages',
  blog_posts: 'Blog posts',
  blog_authors: 'Blog authors',
  blog_tags: 'Blog tags',
  hubdb_tables: 'HubDB tables',
  hubdb_rows: 'HubDB rows',
  url_redirects: 'URL redirects',
};
export const typeLabel = (t) => t == null ? 'Checking for changes' : TYPE_LABELS[t] ?? String(t).replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase());

/**
 * Display statuses (the `data-status` of every view), a superset of the API's:
 * `queued` (pending, nothing started), `waiting` (pending with a reason: HubSpot's
 * daily limit, an export waiting for the fetch), `running`, and the API's
 * terminal ones.
 */
export const STATUS_LABELS = {
  queued: 'Waiting to start',
  waiting: 'Waiting',
  running: 'Running',
  completed: 'Completed',
  partially_failed: 'Finished with errors',
  failed: 'Failed',
  stopped: 'Stopped',
};
const TERMINAL = new Set(['completed', 'failed', 'stopped', 'partially_failed']);
export const isTerminal = (status) => TERMINAL.has(status);

/**
 * Why a pending job waits, in the user's words; null when it does not.
 * `ctx.fetchInFlight`: content types with a pending or running fetch job on the
 * same portal (an export of a type waits for its fetch; the queue claims it after).
 */
export function waitingReasonOf(job, kind, ctx = {}) {
  if (job.status !== 'pending') return null;
  const now = ctx.now ?? Date.now();
  // A park (HubSpot's daily limit, its Retry-After) or an operator's pause says so itself; a retry says how long it goes on.
  if (job.waitingReason && !RETRY_TEXT.test(job.waitingReason)) return humanReason(job.waitingReason, now);
  const retry = retryOf(job, now);
  if (retry) return retryReason(retry, now);
  if (job.waitingReason) return humanReason(job.waitingReason, now);
  if (kind === 'export' && ctx.fetchInFlight?.has(job.contentType)) return 'export waiting for the fetch';
  return null;
}

/** The HTTP API's words for a retry backoff ("retrying after a failure until <ISO>"); the page says more (retryReason). */
const RETRY_TEXT = /^retrying after a failure\b/;

// "waiting for HubSpot's daily limit until 2026-05-02T04:00:00.000Z" -> "waiting for HubSpot's daily limit (until 06:00)";
// a time that has passed is not shown (the wait is over: the job is claimed any moment).
function humanReason(reason, now = Date.now()) {
  const m = /^(.*?)\s+until\s+(\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d))$/.exec(reason);
  if (!m) return reason;
  const until = new Date(m[2]);
  if (Number.isNaN(until.getTime()) || until.getTime() <= now) return m[1];
  return `${m[1]} (until ${clock(until, now)})`;
}

/** "06:00", with seconds when it is less than 10 minutes away. */
function clock(date, now) {
  const soon = date.getTime() - now < 600_000;
  return date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', ...(soon ? { second: '2-digit' } : {}) });
}

/** The worker's words for HubSpot not answering (shared/hubspot/errors.ts: HubSpotTransientError, a 429 that persisted). */
const HUBSPOT_UNAVAILABLE = /HubSpot is temporarily unavailable|HubSpot rate limit reached/i;

/**
 * A job that keeps failing with retryable errors and is retried (the API's retryingUntil): `{ until, next,
 * hubspot }`, `until` when it gives up, `next` its next try (pending: when its backoff ends; null while it
 * tries), `hubspot` whether HubSpot is what does not answer. Null for a job that is not retrying.
 */
export function retryOf(job, now = Date.now()) {
  if (!job.retryingUntil || isTerminal(job.status)) return null;
  const until = Date.parse(job.retryingUntil);
  if (!Number.isFinite(until)) return null;
  const next = job.status === 'pending' && job.waitingUntil ? Date.parse(job.waitingUntil) : null;
  return { until, next: Number.isFinite(next) ? next : null, hubspot: HUBSPOT_UNAVAILABLE.test(job.lastError ?? '') };
}

/** "HubSpot is not answering; retrying until 02:28" (the give-up time; once it has passed: the last try). */
export function retryReason(retry, now = Date.now()) {
  const what = retry.hubspot ? 'HubSpot is not answering' : 'it failed';
  if (retry.until <= now) return `${what}; trying one last time`;
  return `${what}; retrying until ${clock(new Date(retry.until), now)}`;
}

/**
 * The job's total as shown: its done count once completed, unknown (null) when
 * it has done more than the total it was created with (an export created while
 * its fetch was still adding items counts those at its creation).
 */
export function totalOf(job) {
  if (job.status === 'completed') return job.done;
  if (job.total !== null && job.done > job.total) return null;
  return job.total;
}

/** One job as every view shows it: `{ status, label, reason, pct, tone }`. */
export function jobView(job, kind, ctx = {}) {
  const now = ctx.now ?? Date.now();
  let reason = waitingReasonOf(job, kind, ctx);
  const retry = retryOf(job, now);
  let status = job.status;
  if (status === 'pending') status = reason ? 'waiting' : 'queued';
  const total = totalOf(job);
  const pct = job.status === 'completed' ? 100 : total ? Math.min(100, (100 * job.done) / total) : 0;
  let label = STATUS_LABELS[status];
  if (status === 'waiting') label = capitalise(reason);
  // A stopped job that had fetched everything still did not finish (deletions were not looked for).
  if (status === 'stopped') label = total && job.done >= total ? 'Stopped before finishing' : 'Stopped';
  if (status === 'queued' && job.attempts > 0) label = 'Retrying soon';
  const parked = job.waitingReason && !RETRY_TEXT.test(job.waitingReason); // a park's or a pause's own reason
  if (retry && job.status === 'pending' && !parked) {
    // Its own line: when it tries next (never a time that has passed); the run says until when it goes on.
    label = retry.next && retry.next > now + 1000 ? `Retrying in ${duration((retry.next - now) / 1000)}` : 'Retrying soon';
  }
  if (retry && job.status === 'running') {
    label = 'Trying again';
    reason = retryReason(retry, now);
  }
  return { status, label, reason, pct, tone: toneOf(status), retry };
}

/** Publish and restore runs settle by their items, not their jobs (docs/publish.md): once finished, the run's own status. */
const SETTLED_BY_ITEMS = new Set(['publish', 'restore']);

/**
 * A run's display status, from its jobs when they are known (the same rule
 * settle_run ends runs by), else from the run's own counters. `{ status, label,
 * reason, finished }`.
 */
export function runView(run, jobs, ctx = {}) {
  let status;
  let reason = null;
  if (run.finishedAt && SETTLED_BY_ITEMS.has(run.kind) && isTerminal(run.status)) status = run.status; // its jobs may all complete, its items not
  else if (jobs && jobs.length) {
    const views = jobs.map((j) => jobView(j, run.kind, ctx));
    const count = (s) => views.filter((v) => v.status === s).length;
    const active = views.filter((v) => !isTerminal(v.status));
    // Jobs retrying after failures: the run says so, until the last of them would give up, while it goes on.
    const retrying = active.filter((v) => v.retry);
    const retry = retrying.length ? retrying.reduce((a, v) => (v.retry.until > a.until ? v.retry : a), retrying[0].retry) : null;
    if (!active.length) {
      status = count('stopped') ? 'stopped' : !count('failed') ? 'completed' : !count('completed') ? 'failed' : 'partially_failed';
    } else if (count('running')) {
      status = 'running';
      if (retry) reason = retryReason(retry, ctx.now ?? Date.now());
    } else if (active.every((v) => v.status === 'waiting')) {
      status = 'waiting';
      reason = retry ? retryReason(retry, ctx.now ?? Date.now()) : active[0].reason;
    } else if (jobs.some((j) => j.startedAt || isTerminal(j.status))) {
      status = 'running'; // between two of its jobs
      if (retry) reason = retryReason(retry, ctx.now ?? Date.now());
    } else status = 'queued';
  } else if (run.finishedAt || isTerminal(run.status)) status = run.status;
  else if (run.waitingReason) {
    status = 'waiting';
    reason = humanReason(run.waitingReason, ctx.now ?? Date.now());
  } else status = run.status === 'running' || run.startedAt || (run.itemsDone ?? 0) > 0 ? 'running' : 'queued';
  const label = status === 'waiting' ? capitalise(reason) : STATUS_LABELS[status] ?? status;
  return { status, label, reason, finished: isTerminal(status), tone: toneOf(status) };
}

function toneOf(status) {
  return { completed: 'ok', failed: 'bad', partially_failed: 'bad', stopped: 'neutral', running: 'run', waiting: 'wait', queued: 'wait' }[status] ?? 'neutral';
}
const capitalise = (s) => (s ? s[0].toUpperCase() + s.slice(1) : s);

/** Items done and total over the jobs (total null while one is unknown). */
export function itemsOf(run, jobs) {
  if (!jobs || !jobs.length) return { done: run.itemsDone ?? 0, total: run.itemsTotal ?? null };
  const totals = jobs.map(totalOf);
  return {
    done: jobs.reduce((s, j) => s + j.done, 0),
    total: totals.every((t) => t !== null) ? totals.reduce((s, t) => s + t, 0) : null,
  };
}

// ---------- rate, ETA and throughput ----------

/**
 * A job's progress as points [t ms, done, pages]: its start at 0, what the page
 * saw (`samples`, oldest first), and its end (or now). Linear in between, so a
 * job seen only once (a small portal, or a run opened after it ended) still has
 * a rate: its average.
 */
export function progressPoints(job, samples = [], now = Date.now()) {
  const start = job.startedAt ? Date.parse(job.startedAt) : null;
  if (start === null) return [];
  const end = job.finishedAt ? Date.parse(job.finishedAt) : now;
  const pts = [[start, 0, 0]];
  for (const s of samples) if (s.t > pts[pts.length - 1][0] && s.t < end) pts.push([s.t, Math.min(s.done, job.done), Math.min(s.pages ?? 0, pagesOf(job))]);
  pts.push([Math.max(end, pts[pts.length - 1][0] + 1), job.done, pagesOf(job)]);
  return pts;
}
export const pagesOf = (job) => (job.result && typeof job.result.pages === 'number' ? job.result.pages : 0);

/**
 * Items per second and seconds left: over the last `windowMs` of what the page
 * saw while the job runs, and its average over its whole run otherwise (or
 * when the window holds no progress yet). Null when there is nothing to go by.
 */
export function rateAndEta(job, samples = [], now = Date.now(), windowMs = 15_000) {
  const pts = progressPoints(job, samples, now);
  if (pts.length < 2 || job.status === 'pending') return { rate: null, eta: null };
  const last = pts[pts.length - 1];
  let rate = null;
  if (job.status === 'running') {
    const from = pts.find((p) => p[0] >= last[0] - windowMs && p !== last) ?? pts[pts.length - 2];
    if (last[0] - from[0] >= 1000 && last[1] > from[1]) rate = ((last[1] - from[1]) * 1000) / (last[0] - from[0]);
  }
  if (rate === null) {
    const secs = (last[0] - pts[0][0]) / 1000;
    rate = secs > 0 && job.done > 0 ? job.done / secs : null;
  }
  let eta = null;
  if (job.status === 'completed') eta = 0;
  else if (job.status === 'running' && rate && totalOf(job) !== null) eta = Math.max(0, (totalOf(job) - job.done) / rate);
  return { rate, eta };
}

/**
 * The run's throughput over time: `buckets` equal slices from the first job's
 * start to the last's end (or now), each `{ t, items, requests }` per second
 * (requests: HubSpot pages fetched, one request each), summed over the jobs.
 */
export function throughputSeries(jobs, samplesByJob = new Map(), now = Date.now(), buckets = 30) {
  const lines = jobs.map((j) => progressPoints(j, samplesByJob.get(String(j.id)) ?? [], now)).filter((p) => p.length >= 2);
  if (!lines.length) return [];
  const t0 = Math.min(...lines.map((p) => p[0][0]));
  const t1 = Math.max(...lines.map((p) => p[p.length - 1][0]));
  const step = Math.max(1, (t1 - t0) / buckets);
  const at = (pts, t, k) => {
    if (t <= pts[0][0]) return 0;
    for (let i = 1; i < pts.length; i++) {
      const [ta, ...a] = pts[i - 1];
      const [tb, ...b] = pts[i];
      if (t <= tb) return a[k] + ((b[k] - a[k]) * (t - ta)) / Math.max(1, tb - ta);
    }
    return pts[pts.length - 1][k + 1];
  };
  const out = [];
  for (let i = 0; i < buckets; i++) {
    const a = t0 + i * step;
    const b = a + step;
    let items = 0;
    let requests = 0;
    for (const pts of lines) {
      items += at(pts, b, 0) - at(pts, a, 0);
      requests += at(pts, b, 1) - at(pts, a, 1);
    }
    out.push({ t: b, items: (items * 1000) / step, requests: (requests * 1000) / step });
  }
  return out;
}

// ---------- syncs, schedules and HubSpot requests ----------

/** What a fetch's mode means to people: an incremental reads only what changed. */
export const FETCH_MODE_LABELS = { incremental: 'changes only', full: 'full' };
export const fetchModeLabel = (mode) => FETCH_MODE_LABELS[mode] ?? FETCH_MODE_LABELS.full;

/**
 * The portal's last finished sync (GET /orchestrator/sync `lastSync`) in words:
 * `{ status, tone, mode, changes }`; `changes` says how many items were checked
 * and how many of them changed ("41,705 checked, 0 changed").
 */
export function lastSyncView(last) {
  if (!last) return null;
  const c = last.changes ?? { added: 0, updated: 0, deleted: 0 };
  const changed = c.added + c.updated + c.deleted;
  const checked = typeof last.checked === 'number' ? `${last.checked.toLocaleString()} checked, ` : '';
  const detail = changed ? ` (${c.added.toLocaleString()} new, ${c.updated.toLocaleString()} updated, ${c.deleted.toLocaleString()} deleted)` : '';
  const status = last.status ?? 'completed';
  return {
    status,
    tone: toneOf(status),
    label: STATUS_LABELS[status] ?? status,
    mode: fetchModeLabel(last.mode),
    scheduled: last.trigger === 'schedule',
    changes: `${checked}${changed.toLocaleString()} changed${detail}`,
  };
}

/** A sync schedule (the API's SyncSchedule) in words: "changes every 15 min · full every 1 day". */
export function scheduleText(schedule) {
  if (!schedule) return 'no sync schedule';
  const every = (m) => (m % 1440 === 0 ? `${m / 1440} day${m === 1440 ? '' : 's'}` : duration(m * 60));
  const parts = [];
  if (schedule.incrementalEveryMinutes) parts.push(`changes every ${every(schedule.incrementalEveryMinutes)}`);
  if (schedule.fullEveryMinutes) parts.push(`full every ${every(schedule.fullEveryMinutes)}`);
  return `${parts.join(' · ')}${schedule.paused ? ' (paused)' : ''}`;
}

/** HubSpot's limit per 10 s from a portal's learned limits (null while unknown). */
export function limitPer10s(limits) {
  return limits?.maxPerInterval && limits.intervalMs ? (limits.maxPerInterval * 10_000) / limits.intervalMs : null;
}

/**
 * The requests chart's points: the budget's own count per 10-s window
 * (`windows`: [{ windowStart, requests }], windows without requests absent)
 * from `from` to `to` (ms), every window present, at its end.
 */
export function requestPoints(windows, from, to) {
  const at = new Map((windows ?? []).map((w) => [Date.parse(w.windowStart), w.requests]));
  const out = [];
  for (let t = Math.floor(from / 10_000) * 10_000; t <= to; t += 10_000) out.push({ t: Math.min(t + 10_000, to), v: at.get(t) ?? 0 });
  // From the run's start (its first window's count), so the chart spans the whole run, and has two points.
  if (out.length && out[0].t > from) out.unshift({ t: from, v: out[0].v });
  return out;
}

/** "waiting for HubSpot's 10-s window (until 14:03:05)" while the portal's rate window is full; null otherwise. */
export function rateWindowReason(rateWindow, now = Date.now()) {
  if (!rateWindow?.fullUntil || Date.parse(rateWindow.fullUntil) <= now) return null;
  const until = new Date(rateWindow.fullUntil).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return `waiting for HubSpot's 10-s window (until ${until})`;
}

// ---------- names and times ----------

/** What each kind of run is called (a publish's three runs included: docs/publish.md). */
export const RUN_KIND_LABELS = { fetch: 'Fetch', export: 'Export', plan: 'Plan', publish: 'Publish', restore: 'Restore' };
export const kindLabel = (kind) => RUN_KIND_LABELS[kind] ?? 'Fetch';

/** What Stop asks before it stops a run, by the run's kind (a publish's items written so far stay written). */
export function stopQuestion(kind) {
  if (kind === 'publish' || kind === 'restore') {
    return `Stop this ${kind === 'publish' ? 'publish' : 'roll back'}? What is written to HubSpot stays written; the items not written yet are listed as failed.`;
  }
  if (kind === 'plan') return 'Stop this plan? Nothing is written to HubSpot; its edits are pending again.';
  return `Stop this ${kind === 'export' ? 'export' : 'sync'}? What it has fetched so far is kept; the rest is not done.`;
}

/** "Fetch · today 14:03", "Export · 3 May 09:12", "Publish · today 14:05", "Restore · today 14:07" (a roll back). */
export function runName(run, now = Date.now()) {
  return `${kindLabel(run.kind)} · ${when(run.createdAt, now)}`;
}

export function when(iso, now = Date.now()) {
  const d = new Date(iso);
  const today = new Date(now);
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  if (d.toDateString() === today.toDateString()) return `today ${time}`;
  const yesterday = new Date(now - 86_400_000);
  if (d.toDateString() === yesterday.toDateString()) return `yesterday ${time}`;
  return `${d.toLocaleDateString([], { day: 'numeric', month: 'short' })} ${time}`;
}

/** "4 s", "2 min 5 s", "1 h 3 min". */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ''}`;
}

/** "just now", "12 s ago", "5 min ago", "2 h ago", "3 days ago". */
export function ago(iso, now = Date.now()) {
  if (!iso) return '—';
  const s = Math.round((now - Date.parse(iso)) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  const d = Math.floor(s / 86_400);
  return `${d} day${d === 1 ? '' : 's'} ago`;
}

/** When a run went (ms): from its first job's claim (or its own start, else its creation) to its end (or now). */
export function runSpan(run, now = Date.now(), jobs = null) {
  const starts = [run.startedAt, ...(jobs ?? []).map((j) => j.startedAt)].filter(Boolean).map((t) => Date.parse(t));
  const from = starts.length ? Math.min(...starts) : Date.parse(run.createdAt);
  return { from, to: Math.max(from, run.finishedAt ? Date.parse(run.finishedAt) : now) };
}

/** How long a run has been going (or took), in seconds: its span (runSpan). The header and both charts say this. */
export function elapsedOf(run, now = Date.now(), jobs = null) {
  const { from, to } = runSpan(run, now, jobs);
  return Math.max(0, (to - from) / 1000);
}

export const plural = (n, one, many = `${one}s`) => `${n.toLocaleString()} ${n === 1 ? one : many}`;

// ---------- what went wrong, for people ----------

/**
 * The user's message for an orchestrator error code (the API's own message is
 * for developers: it may name settings or OAuth where the user has a token).
 * `ctx.authKind`: how the portal is connected ('private_app' | 'oauth').
 */
export function errorMessage(code, ctx = {}) {
  const reconnect = ctx.authKind === 'oauth'
    ? 'Connect with HubSpot again to continue.'
    : 'Connect the portal again with a new private app token.';
  switch (code) {
    case 'HUBSPOT_TOKEN_REJECTED':
      return 'HubSpot did not accept this private app token. Copy it again from HubSpot (Settings › Integrations › Private apps) and check the app has the CMS scopes.';
    case 'HUBSPOT_AUTH_FAILED': return `HubSpot no longer accepts this portal's connection. ${reconnect}`;
    case 'HUBSPOT_DISCONNECTED': return `HubSpot access to this portal was removed. ${reconnect}`;
    case 'HUBSPOT_NOT_CONNECTED': return 'This portal is not connected to HubSpot yet: connect it first.';
    case 'HUBSPOT_CREDENTIALS_UNREADABLE': return `This portal's saved HubSpot connection can no longer be used. ${reconnect}`;
    case 'HUBSPOT_UNAVAILABLE': return 'HubSpot is not answering right now. Nothing was started: try again in a minute.';
    case 'RATE_LIMITED': return `Too many actions in a short time. Try again in ${ctx.retryAfter ?? 'a few'} seconds.`;
    case 'PORTAL_NOT_FOUND': return 'This portal is no longer available.';
    case 'RUN_NOT_FOUND': return 'This sync is no longer available.';
    case 'ALL_DUPLICATE_JOBS': return 'Everything is already being synced.';
    case 'EXPORT_NOT_READY': return 'This export is not finished yet.';
    case 'EXPORT_STOPPED': return 'This export was stopped before it finished, so it has no file. Export again.';
    case 'EXPORT_FAILED': return 'This export failed, so it has no file. Export again.';
    case 'LINK_INVALID': return 'This download link has expired. Download again from the list.';
    case 'EXPORT_FILE_GONE': return 'This export file has expired. Export again for a fresh file.';
    case 'EXPORT_NOT_FOUND': return 'This export could not be found.';
    case 'DOWNLOADS_UNAVAILABLE': return 'Downloads are not available on this server.';
    case 'STORAGE_UNAVAILABLE':
    case 'STORAGE_MISCONFIGURED': return 'The file cannot be downloaded right now; it is kept. Try again later.';
    case 'UNAUTHENTICATED':
    case 'TOKEN_EXPIRED': return 'Your session has ended. Sign in again.';
    case 'AUTH_UNAVAILABLE': return 'Your sign-in could not be checked right now. Try again in a moment.';
    case 'TOKEN_KEYS_MISSING': return 'HubSpot connections cannot be saved yet: this service is not fully set up.';
    case 'OAUTH_NOT_CONFIGURED': return 'Connecting with HubSpot is not set up here. Use a private app token instead.';
    case 'HUBSPOT_ACCESS_DENIED': return 'The HubSpot install was cancelled. Nothing was connected.';
    case 'OAUTH_STATE_INVALID':
    case 'HUBSPOT_CODE_REJECTED': return 'That HubSpot sign-in expired or was already used. Start again with “Connect with HubSpot”.';
    case 'HUBSPOT_INSTALL_FAILED': return 'HubSpot could not complete the install. Try again.';
    case 'HUBSPOT_OAUTH_REJECTED': return 'HubSpot refused this service’s app settings. Nothing was connected; please contact support.';
    case 'NOT_AN_OPERATOR': return 'For operators only.';
    case 'INVALID_BODY': return `Please check ${fieldList(ctx.fieldErrors)}.`;
    default: return 'Something went wrong on our side. Nothing was changed: try again.';
  }
}

const FIELD_NAMES = { name: 'the name', accessToken: 'the token', portalId: 'the portal' };
function fieldList(fieldErrors) {
  const names = [...new Set((fieldErrors ?? []).map((f) => FIELD_NAMES[String(f.path).split('.')[0]] ?? String(f.path)))];
  return names.length ? names.join(' and ') : 'what you entered';
}

/**
 * A failed job's last error (the worker's text, written for developers) in the
 * user's words; the text itself stays available as a tooltip. For a job that
 * ended failed only: one still retrying says so with retryReason.
 */
export function jobErrorMessage(lastError, ctx = {}) {
  if (!lastError) return null;
  const e = String(lastError);
  const scope = /missing the scope "([^"]+)"/.exec(e)?.[1];
  if (scope) {
    return ctx.authKind === 'oauth'
      ? `The HubSpot connection lacks the “${scope}” permission this type needs: connect with HubSpot again and allow it.`
      : `The private app lacks the “${scope}” scope this type needs: add it in HubSpot, then sync again.`;
  }
  if (/access was removed|uninstalled|disconnected/i.test(e)) return errorMessage('HUBSPOT_DISCONNECTED', ctx);
  if (/rejected the access token|refused access|reconnect/i.test(e)) return errorMessage('HUBSPOT_AUTH_FAILED', ctx);
  if (/daily limit/i.test(e)) return "HubSpot's daily request limit was used up before this type finished. It continues after the limit resets.";
  if (/file_size_limit|too large|exceed/i.test(e)) return 'The export file would be larger than the file store allows.';
  if (/stopped/i.test(e)) return null;
  if (HUBSPOT_UNAVAILABLE.test(e) || /\b5\d\d\b|timed? ?out|unavailable|ECONN|socket|network/i.test(e)) {
    return 'HubSpot did not answer for too long, so this type was given up. “Retry failed types” tries it again.';
  }
  return 'This type could not be synced. Try again; if it keeps failing, contact support.';
}
