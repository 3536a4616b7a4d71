// The live progress page: one ES module, no build step, no dependencies
// locally. It talks to the orchestrator function only (plain fetch with the
// user's access token); when deployed it also loads supabase-js (for signing
// in and for realtime postgres_changes on runs and jobs). Locally
// (`npm start -- --serve`) the gateway's Realtime stand-in serves those too.
//
// Configuration, first found wins: ./config.json (written by npm start --serve),
// the URL fragment (#supabaseUrl=…&accessToken=…[&anonKey=…]), or the sign-in form.

const SUPABASE_JS = 'https://esm.sh/@supabase/supabase-js@2.109.0'; // the version package.json pins
const POLL_MS_LOCAL = 1000;
const POLL_MS_REALTIME = 15000; // a safety net next to realtime
const RATE_WINDOW_MS = 15000;
const POLL_OFF = new URLSearchParams(location.search).get('poll') === 'off'; // ?poll=off: realtime only (the browser test)

const $ = (id) => document.getElementById(id);
const state = {
  cfg: null, // { supabaseUrl, anonKey?, accessToken?, mode: 'local'|'deployed', demoPortal? }
  supabase: null, // supabase-js client (deployed only)
  token: null,
  portalId: null,
  runId: null,
  run: null,
  jobs: [],
  samples: new Map(), // job id -> [{ t, done }]
  runsCursor: null,
  channel: null,
  pollTimer: null,
  statsTimer: null,
};

// ---------- configuration and sign-in ----------

async function loadConfig() {
  try {
    const res = await fetch('./config.json', { cache: 'no-store' });
    if (res.ok) return { mode: 'local', ...(await res.json()) };
  } catch {
    /* not served by npm start: fall through */
  }
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get('supabaseUrl') && hash.get('accessToken')) {
    return { mode: hash.get('mode') ?? 'deployed', supabaseUrl: hash.get('supabaseUrl'), accessToken: hash.get('accessToken'), anonKey: hash.get('anonKey') };
  }
  return null;
}

async function loadSupabase(cfg) {
  const { createClient } = await import(cfg.supabaseJsUrl ?? SUPABASE_JS);
  return createClient(cfg.supabaseUrl, cfg.anonKey);
}

function showSignIn() {
  $('signin').hidden = false;
  $('connection').textContent = 'Sign in to your Supabase project.';
  $('cfg-url').value = localStorage.getItem('queue.supabaseUrl') ?? '';
  $('cfg-key').value = localStorage.getItem('queue.anonKey') ?? '';
  $('signin-btn').onclick = async () => {
    const cfg = { mode: 'deployed', supabaseUrl: $('cfg-url').value.trim().replace(/\/+$/, ''), anonKey: $('cfg-key').value.trim() };
    try {
      const supabase = await loadSupabase(cfg);
      const { data, error } = await supabase.auth.signInWithPassword({ email: $('signin-email').value, password: $('signin-password').value });
      if (error) throw error;
      localStorage.setItem('queue.supabaseUrl', cfg.supabaseUrl);
      localStorage.setItem('queue.anonKey', cfg.anonKey);
      state.supabase = supabase;
      supabase.auth.onAuthStateChange((_e, session) => {
        if (session) state.token = session.access_token;
      });
      await start({ ...cfg, accessToken: data.session.access_token });
    } catch (e) {
      $('connection').textContent = `Sign-in failed: ${e.message ?? e}`;
    }
  };
}

// ---------- the orchestrator ----------

class ApiError extends Error {
  constructor(status, body, retryAfter) {
    super(body?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.code ?? 'HTTP_ERROR';
    this.details = body?.details;
    this.retryAfter = retryAfter;
  }
}

async function api(path, { method = 'GET', body, raw = false } = {}) {
  const headers = { Authorization: `Bearer ${state.token}` };
  if (state.cfg.anonKey) headers.apikey = state.cfg.anonKey;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(`${state.cfg.supabaseUrl}/functions/v1/orchestrator${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) {
    const err = await res.json().catch(() => null);
    throw new ApiError(res.status, err, res.headers.get('retry-after'));
  }
  return raw ? res : res.json();
}

function say(text, error = false) {
  const m = $('message');
  m.textContent = text;
  m.className = error ? 'error' : '';
}

function sayError(e) {
  if (!(e instanceof ApiError)) return say(String(e.message ?? e), true);
  let text = `${e.code}: ${e.message}`;
  if (e.code === 'RATE_LIMITED') text += ` (retry in ${e.retryAfter} s)`;
  if (e.details?.fieldErrors) text += ` — ${e.details.fieldErrors.map((f) => `${f.path}: ${f.message}`).join('; ')}`;
  say(text, true);
}

// ---------- portals and runs ----------

async function loadPortals(select) {
  const { portals } = await api('/portals');
  const sel = $('portal-select');
  // A disconnected portal (the HubSpot app was uninstalled) says so: connecting it again clears that.
  const label = (p) => `${p.name} (HubSpot ${p.hubspotPortalId})${p.disconnectedAt ? ' — disconnected: reconnect it' : ''}`;
  sel.replaceChildren(...portals.map((p) => Object.assign(document.createElement('option'), { value: p.id, textContent: label(p), title: p.disconnectedReason ?? '' })));
  if (select) sel.value = select;
  state.portalId = sel.value || null;
  for (const id of ['fetch-btn', 'export-btn']) $(id).disabled = !state.portalId;
  if (!portals.length || portals.some((p) => p.id === state.portalId && p.disconnectedAt)) $('connect-box').open = true;
  return portals;
}

async function loadRuns(more = false) {
  if (!state.portalId) return;
  const q = new URLSearchParams({ portalId: state.portalId, limit: '10' });
  if (more && state.runsCursor) q.set('cursor', state.runsCursor);
  const { runs, nextCursor } = await api(`/runs?${q}`);
  state.runsCursor = nextCursor;
  $('runs-more').hidden = !nextCursor;
  const items = runs.map((r) => {
    const li = document.createElement('li');
    li.dataset.runId = r.id;
    li.className = r.id === state.runId ? 'active' : '';
    const pct = r.itemsTotal ? ` · ${Math.floor((100 * (r.itemsDone ?? 0)) / Math.max(1, r.itemsTotal))}%` : '';
    li.textContent = `${new Date(r.createdAt).toLocaleString()} · ${r.kind} · ${r.status} · ${r.contentTypes.length} types · ${r.itemsDone ?? 0}${r.itemsTotal !== null ? ` / ${r.itemsTotal}` : ''} items${pct}`;
    li.onclick = () => showRun(r.id);
    return li;
  });
  if (more) $('runs-list').append(...items);
  else $('runs-list').replaceChildren(...items);
}

async function trigger(kind) {
  try {
    const created = await api('', { method: 'POST', body: { portalId: state.portalId, kind } });
    const dups = Object.entries(created.duplicateRunIds ?? {});
    say(`${kind} run started for ${created.createdTypes.length} types` + (dups.length ? `; already in flight elsewhere: ${dups.map(([t]) => t).join(', ')}` : '') + '.');
    await showRun(created.runId);
  } catch (e) {
    if (e instanceof ApiError && e.code === 'ALL_DUPLICATE_JOBS') {
      const runIds = [...new Set(Object.values(e.details?.duplicateRunIds ?? {}))];
      say(`Every type is already in flight${runIds.length ? ': showing that run' : ''}.`);
      if (runIds[0]) await showRun(runIds[0]);
    } else sayError(e);
  }
  await loadRuns().catch(() => {});
}

// ---------- one run, live ----------

async function showRun(runId) {
  state.runId = runId;
  state.samples.clear();
  for (const li of $('runs-list').children) li.className = li.dataset.runId === runId ? 'active' : '';
  await refreshRun();
  subscribe(runId);
}

async function refreshRun() {
  if (!state.runId) return;
  try {
    const { run, jobs } = await api(`?runId=${state.runId}`);
    const changed = state.run?.id === run.id && state.run.status !== run.status;
    state.run = run;
    state.jobs = jobs;
    render();
    if (changed) await loadRuns(); // the runs list shows statuses too
  } catch (e) {
    sayError(e);
  }
}

/** Realtime when the project serves it (postgres_changes on the run and its jobs); polling too, unless ?poll=off. */
function subscribe(runId) {
  clearInterval(state.pollTimer);
  if (state.channel) state.supabase?.removeChannel(state.channel);
  state.channel = null;
  let pollMs = POLL_MS_LOCAL;
  if (state.supabase) {
    pollMs = POLL_MS_REALTIME;
    state.supabase.realtime.setAuth(state.token);
    const channel = state.supabase
      .channel(`run-${runId}`)
      .on('postgres_changes', { event: '*', schema: 'public', table: 'jobs', filter: `run_id=eq.${runId}` }, (p) => mergeJob(p.new))
      .on('postgres_changes', { event: 'UPDATE', schema: 'public', table: 'runs', filter: `id=eq.${runId}` }, (p) => mergeRun(p.new))
      // Changes arrive from this message on: read the run once more so none falls in between.
      .on('system', {}, (m) => {
        if (m.extension !== 'postgres_changes' || state.channel !== channel) return;
        $('connection').textContent = `${state.cfg.supabaseUrl} · ${m.status === 'ok' ? 'live (realtime)' : `realtime error: ${m.message}`}`;
        if (m.status === 'ok') refreshRun();
        else if (!POLL_OFF) {
          clearInterval(state.pollTimer);
          state.pollTimer = setInterval(refreshRun, POLL_MS_LOCAL);
        }
      })
      .subscribe((status) => {
        if (status !== 'SUBSCRIBED') $('connection').textContent = `${state.cfg.supabaseUrl} · realtime ${status.toLowerCase()}`;
        if (status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') {
          // Remove the channel (realtime-js would rejoin it forever) and poll instead.
          state.supabase.removeChannel(channel);
          if (state.channel === channel) state.channel = null;
          clearInterval(state.pollTimer);
          if (!POLL_OFF) state.pollTimer = setInterval(refreshRun, POLL_MS_LOCAL);
        }
      });
    state.channel = channel;
  }
  if (!POLL_OFF) state.pollTimer = setInterval(refreshRun, pollMs);
}

// Realtime rows are the tables' own columns (snake_case).
function mergeJob(row) {
  const j = state.jobs.find((x) => String(x.id) === String(row.id));
  if (!j) return;
  Object.assign(j, { status: row.status, attempts: row.attempts, done: row.progress_done, total: row.progress_total, lastError: row.last_error, finishedAt: row.finished_at });
  if (row.result && !(j.result && j.result.urlExpiresAt)) j.result = row.result;
  render();
  if (row.status === 'completed' && state.run?.kind === 'export') refreshRun(); // fresh signed URL
}

function mergeRun(row) {
  if (!state.run) return;
  const changed = state.run.status !== row.status;
  Object.assign(state.run, { status: row.status, jobsCompleted: row.jobs_completed, jobsFailed: row.jobs_failed, jobsStopped: row.jobs_stopped, finishedAt: row.finished_at });
  render();
  if (changed) loadRuns().catch(() => {});
}

function rateAndEta(job) {
  const now = Date.now();
  const s = state.samples.get(job.id) ?? [];
  if (!s.length || s[s.length - 1].done !== job.done) s.push({ t: now, done: job.done });
  while (s.length > 2 && s[0].t < now - RATE_WINDOW_MS) s.shift();
  state.samples.set(job.id, s);
  if (job.status !== 'running' || s.length < 2) return { rate: null, eta: null };
  const first = s[0];
  const rate = (job.done - first.done) / Math.max(0.001, (now - first.t) / 1000);
  const eta = rate > 0 && job.total !== null ? Math.max(0, (job.total - job.done) / rate) : null;
  return { rate, eta };
}

const fmtSeconds = (s) => (s === null ? '—' : s < 60 ? `${Math.ceil(s)} s` : `${Math.floor(s / 60)} min ${Math.ceil(s % 60)} s`);
const cell = (text, cls) => Object.assign(document.createElement('td'), { textContent: text, className: cls ?? '' });

function render() {
  const { run, jobs } = state;
  if (!run) return;
  $('run-title').textContent = `${run.kind} · ${run.id}`;
  const st = $('run-status');
  st.textContent = run.status;
  st.className = `status ${run.status}`;
  $('run-items').textContent = `${run.jobsCompleted}/${run.jobsTotal} jobs done` + (run.itemsTotal !== null ? ` · ${run.itemsDone} / ${run.itemsTotal} items` : '');
  $('stop-btn').disabled = Boolean(run.finishedAt);
  const rows = jobs.map((j) => {
    const tr = document.createElement('tr');
    tr.dataset.type = j.contentType;
    tr.dataset.status = j.status;
    tr.dataset.jobId = j.id;
    const pct = j.total ? Math.min(100, (100 * j.done) / j.total) : j.status === 'completed' ? 100 : 0;
    const bar = document.createElement('div');
    bar.className = 'bar';
    bar.title = `${pct.toFixed(1)}%`;
    bar.append(Object.assign(document.createElement('div'), { style: `width:${pct}%` }));
    const barCell = document.createElement('td');
    barCell.append(bar);
    const { rate, eta } = rateAndEta(j);
    const action = document.createElement('td');
    if (run.kind === 'export' && j.status === 'completed' && j.result) {
      const b = Object.assign(document.createElement('button'), { textContent: `Download (${j.result.rows} rows)`, className: 'download' });
      b.dataset.type = j.contentType;
      b.onclick = () => download(j);
      action.append(b);
    } else if (j.lastError) action.append(Object.assign(document.createElement('span'), { className: 'muted', textContent: j.lastError.slice(0, 160) }));
    tr.append(
      cell(j.contentType),
      cell(j.status, `status ${j.status}`),
      barCell,
      cell(`${j.done} / ${j.total ?? '?'}`),
      cell(rate === null ? '—' : `${rate.toFixed(1)}/s`, 'rate'),
      cell(fmtSeconds(eta), 'eta'),
      cell(`${j.attempts}/${j.maxAttempts}`),
      action,
    );
    return tr;
  });
  $('jobs').tBodies[0].replaceChildren(...rows);
}

async function download(job) {
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

// ---------- operator view ----------

function renderValue(value) {
  if (Array.isArray(value)) {
    if (!value.length) return Object.assign(document.createElement('span'), { className: 'muted', textContent: 'none' });
    if (value.every((v) => v && typeof v === 'object' && !Array.isArray(v))) {
      const cols = [...new Set(value.flatMap((v) => Object.keys(v)))];
      const table = document.createElement('table');
      const head = document.createElement('tr');
      head.append(...cols.map((c) => Object.assign(document.createElement('th'), { textContent: c })));
      table.append(head);
      for (const v of value.slice(0, 50)) {
        const tr = document.createElement('tr');
        tr.append(...cols.map((c) => cell(typeof v[c] === 'object' && v[c] !== null ? JSON.stringify(v[c]) : String(v[c] ?? ''))));
        table.append(tr);
      }
      return table;
    }
  }
  if (value && typeof value === 'object') {
    const kv = document.createElement('div');
    kv.className = 'kv';
    for (const [k, v] of Object.entries(value)) kv.append(Object.assign(document.createElement('b'), { textContent: k }), wrap(renderValue(v)));
    return kv;
  }
  return Object.assign(document.createElement('span'), { textContent: value === null ? '—' : String(value) });
}
const wrap = (node) => Object.assign(document.createElement('div'), {}).appendChild(node).parentNode;

async function refreshStats() {
  try {
    const { stats } = await api('/stats');
    $('stats').className = '';
    $('stats').replaceChildren(renderValue(stats));
  } catch (e) {
    $('stats').className = 'muted';
    $('stats').textContent = e instanceof ApiError && e.code === 'NOT_AN_OPERATOR' ? 'For operators only (app_metadata.queue_operator).' : `Unavailable: ${e.message}`;
    if (e instanceof ApiError && e.code === 'NOT_AN_OPERATOR') clearInterval(state.statsTimer);
  }
}

// ---------- HubSpot OAuth install ----------

/**
 * Back from HubSpot's authorize page (this page is the app's redirect URL): finishes the install
 * with the query's code (or error) and state; returns the connected portal's id (undefined otherwise).
 */
async function completeInstall() {
  const back = new URLSearchParams(location.search);
  if (!back.has('state') || !(back.has('code') || back.has('error'))) return;
  history.replaceState(null, '', location.pathname + location.hash); // code and state leave the address bar
  const answer = back.has('code') ? { code: back.get('code') } : { error: back.get('error') };
  const p = await api('', { method: 'POST', body: { action: 'complete_hubspot_install', state: back.get('state'), ...answer } });
  $('connect-box').open = false;
  say(`Connected “${p.name}” (HubSpot ${p.hubspotPortalId}) through the HubSpot app.`);
  return p.portalId;
}

// ---------- start ----------

async function start(cfg) {
  state.cfg = cfg;
  state.token ??= cfg.accessToken;
  $('signin').hidden = true;
  $('app').hidden = false;
  $('connection').textContent = `${cfg.supabaseUrl} · ${cfg.mode === 'local' ? 'local (polling)' : 'deployed'}`;
  if (cfg.demoPortal) {
    $('connect-name').value = cfg.demoPortal.name;
    $('connect-token').value = cfg.demoPortal.token;
  }
  $('portal-select').onchange = () => {
    state.portalId = $('portal-select').value;
    loadRuns().catch(sayError);
  };
  $('fetch-btn').onclick = () => trigger('fetch');
  $('export-btn').onclick = () => trigger('export');
  $('runs-more').onclick = () => loadRuns(true).catch(sayError);
  $('stop-btn').onclick = async () => {
    try {
      const r = await api('', { method: 'POST', body: { action: 'stop', runId: state.runId } });
      say(r.stopped ? 'Run stopped.' : `The run had already ended (${r.status}).`);
      await refreshRun();
    } catch (e) {
      sayError(e);
    }
  };
  $('connect-btn').onclick = async () => {
    try {
      const p = await api('', { method: 'POST', body: { action: 'connect_portal', name: $('connect-name').value, accessToken: $('connect-token').value } });
      $('connect-token').value = '';
      $('connect-box').open = false;
      await loadPortals(p.portalId);
      await loadRuns();
      say(`Connected “${p.name}” (HubSpot ${p.hubspotPortalId}).`);
    } catch (e) {
      sayError(e);
    }
  };
  $('install-btn').onclick = async () => {
    try {
      const { authorizeUrl } = await api('', { method: 'POST', body: { action: 'start_hubspot_install' } });
      location.assign(authorizeUrl);
    } catch (e) {
      sayError(e);
    }
  };
  let installed;
  try {
    installed = await completeInstall();
  } catch (e) {
    sayError(e); // e.g. HUBSPOT_ACCESS_DENIED: the install was cancelled on HubSpot
  }
  try {
    await loadPortals(installed);
    await loadRuns();
  } catch (e) {
    sayError(e);
  }
  refreshStats();
  state.statsTimer = setInterval(refreshStats, 3000);
}

const cfg = await loadConfig();
if (!cfg) showSignIn();
else {
  if (cfg.anonKey && (cfg.mode === 'deployed' || cfg.realtime)) {
    state.supabase = await loadSupabase(cfg).catch(() => null);
  }
  await start(cfg);
}
