// The Publish view (docs/publish.md, web/README.md): a card of the Sync view,
// for the portal's owner. Upload an edited export CSV of a content type (or
// plan the app's pending edits), review the plan (counts, how long it stays
// fresh, a paged diff), approve it (a confirmation naming how many items will
// be written), follow the publish run (the page's own run card, live over
// Realtime or polling), read the results per item, roll back (a confirmation)
// and read those results, download the audit CSV. Its errors go to its own
// message line. The app's refresh loop calls loadPublish and renderPublish;
// `initPublish` is given the page's API call, its refresh and showRun.
import { ApiError } from './api-client.js';
import { $, div, node, portal, state } from './page.js';
import { renderChips, renderItems } from './publish-plan.js';
import {
  approveQuestion, countBy, csvErrorLines, DRAFT_TYPES, EDITABLE_TYPES, planHeadline, planPhase, publishErrorMessage, rollbackQuestion, statusField,
} from './publish-status.js';
import { kindLabel, plural, typeLabel, when } from './status.js';

const PAGE = 20; // items per page of the diff
const PLANS = 10; // the portal's newest plans read on every refresh
const TALLY_PAGES = 25; // a finished run's outcomes are counted over at most 25 × 200 items

const pub = {
  api: null,
  refreshAll: null,
  showRun: null,
  available: true, // false when the orchestrator has no publish routes
  portalId: null,
  plans: [], // the portal's newest plans (GET /publish/plans)
  other: null, // a chosen plan older than those
  planId: null, // the plan chosen by this page's last action (null: the run on screen's, else the newest)
  runs: new Map(), // run id -> run, for a plan's runs the refresh loop does not hold
  filter: '',
  cursors: [null], // the diff's pages: the cursor of each page up to the one shown
  items: [],
  next: null,
  itemsKey: null,
  loaded: null, // { page, filter } of the items held
  tally: null, // { key, counts, scanned, complete }: a finished run's outcomes, counted over its items
  message: null, // { text, error, code, lines }
  confirm: null, // 'approve' | 'rollback': the question on screen
  busy: false,
};

// ---------- setup ----------

const labelled = (el, label, role = null) => {
  if (label) el.setAttribute('aria-label', label);
  if (role) el.setAttribute('role', role);
  return el;
};

export function initPublish({ api, refreshAll, showRun }) {
  Object.assign(pub, { api, refreshAll, showRun });
  const card = $('publish-card');
  const typeSelect = labelled(node('select', { id: 'publish-type' },
    ...EDITABLE_TYPES.map((t) => node('option', { value: t, textContent: typeLabel(t) }))), 'Content type of the file');
  const file = labelled(node('input', { id: 'publish-file', type: 'file', accept: '.csv,text/csv' }), 'Edited export (CSV)');
  const mode = labelled(node('select', { id: 'publish-mode' },
    node('option', { value: 'live', textContent: 'write live' }),
    node('option', { value: 'draft', textContent: 'as draft, then push live' }),
    node('option', { value: 'schedule', textContent: 'as draft, publish at…' })), 'How pages and posts are written');
  const at = labelled(node('input', { id: 'publish-at', type: 'datetime-local', hidden: true }), 'Publish at');
  card.replaceChildren(
    div('card-head', node('h2', { textContent: 'Publish edits to HubSpot' }), node('span', { className: 'spacer' }),
      node('span', { className: 'muted', id: 'publish-plans-note' })),
    div('row', typeSelect, file, mode, at,
      node('button', { id: 'publish-upload', className: 'primary', textContent: 'Upload and plan', title: 'Import the edited export and plan it (nothing is written yet)', onclick: upload }),
      node('button', { id: 'publish-pending', textContent: 'Plan pending edits', title: 'Plan the edits your app wrote (nothing is written yet)', onclick: () => plan(null) })),
    node('p', { className: 'muted publish-hint', textContent: 'Export a content type, edit the file in a spreadsheet, upload it here: you see every change before anything is written to HubSpot.' }),
    labelled(node('div', { id: 'publish-message' }), null, 'status'),
    node('div', { id: 'publish-plan', className: 'card-inset', hidden: true },
      div('card-head', node('h3', { id: 'publish-plan-title' }), node('span', { id: 'publish-plan-status', className: 'pill' }),
        node('span', { id: 'publish-plan-note', className: 'muted' })),
      node('div', { id: 'publish-progress', className: 'summary', hidden: true }),
      node('div', { id: 'publish-chips', className: 'chips' }),
      node('div', { id: 'publish-items' }),
      node('div', { id: 'publish-pager', className: 'row' },
        node('button', { id: 'publish-prev', textContent: 'Previous', onclick: () => page(-1) }),
        node('span', { id: 'publish-page-note', className: 'muted' }),
        node('button', { id: 'publish-next', textContent: 'Next', onclick: () => page(1) })),
      node('div', { id: 'publish-confirm', className: 'confirm', hidden: true },
        node('p', { id: 'publish-confirm-text' }),
        div('row', node('button', { id: 'publish-confirm-yes', className: 'primary', onclick: confirmed }),
          node('button', { id: 'publish-confirm-no', textContent: 'Cancel', onclick: () => ask(null) }))),
      node('div', { id: 'publish-actions', className: 'row' },
        node('button', { id: 'publish-approve', className: 'primary', onclick: () => ask('approve') }),
        node('button', { id: 'publish-rollback', className: 'danger', onclick: () => ask('rollback') }),
        node('button', { id: 'publish-again', textContent: 'Plan again', title: 'Read the same edits from HubSpot again', onclick: () => plan(shownPlan()) }),
        node('button', { id: 'publish-discard', textContent: 'Discard plan', title: 'Drop this plan: its edits are pending again', onclick: discard }),
        node('button', { id: 'publish-audit', textContent: 'Download audit CSV', title: 'Who planned, approved and rolled back; per item before, after and HubSpot’s answer', onclick: audit }))),
  );
  // An export's file name starts with its type (site_pages-1a2b3c4d.csv): choose that type.
  file.onchange = () => {
    const t = EDITABLE_TYPES.find((x) => file.files[0]?.name.startsWith(`${x}-`));
    if (t) typeSelect.value = t;
    renderPublish();
  };
  typeSelect.onchange = renderPublish;
  mode.onchange = renderPublish;
}

// ---------- loading (the refresh loop) ----------

/** The portal's plans, the shown plan's page of items, and a finished run's counts: once per refresh. */
export async function loadPublish() {
  if (!pub.available || !state.portalId) return;
  if (pub.portalId !== state.portalId) {
    Object.assign(pub, { portalId: state.portalId, plans: [], other: null, planId: null, message: null, confirm: null, tally: null });
    resetItems();
  }
  try {
    const { plans } = await pub.api(`/publish/plans?${new URLSearchParams({ portalId: state.portalId, limit: String(PLANS) })}`);
    pub.plans = plans;
    if (pub.planId && !plans.some((p) => p.id === pub.planId)) pub.other = (await pub.api(`/publish/plans/${pub.planId}`)).plan;
    else pub.other = null;
    const plan = shownPlan();
    if (!plan) return;
    for (const runId of [plan.publishRunId, plan.restoreRunId]) if (runId && !state.details.has(runId)) await loadRun(runId);
    const phase = phaseOf(plan);
    const field = statusField(phase);
    const key = JSON.stringify([plan.id, plan.status, plan.counts, phase, progressOf(plan.publishRunId), progressOf(plan.restoreRunId), field, pub.filter, pub.cursors.at(-1)]);
    if (key !== pub.itemsKey) await loadItems(plan, field, key);
    if ((phase === 'published' || phase === 'restored') && pub.tally?.key !== `${plan.id}:${phase}`) await countOutcomes(plan, phase);
  } catch (e) {
    if (e instanceof ApiError && e.code === 'ROUTE_NOT_FOUND') pub.available = false; // an orchestrator without publishing
    else if (e instanceof ApiError && e.code === 'PLAN_NOT_FOUND') pub.planId = null;
  }
}

async function loadRun(runId) {
  const known = pub.runs.get(runId);
  if (known?.finishedAt) return;
  try {
    pub.runs.set(runId, (await pub.api(`?runId=${runId}`)).run);
  } catch {
    pub.runs.set(runId, { id: runId, finishedAt: 'unknown' }); // pruned by retention: long finished
  }
}

const runOf = (runId) => state.details.get(runId)?.run ?? state.runs.find((r) => r.id === runId) ?? pub.runs.get(runId) ?? null;
/** A run's progress as the page knows it, so the items are read again as its items are handled. */
const progressOf = (runId) => {
  const d = runId && state.details.get(runId);
  return d ? [d.jobs.reduce((n, j) => n + j.done, 0), Boolean(d.run.finishedAt)] : null;
};
const phaseOf = (plan) => planPhase(plan, (runId) => (runId ? Boolean(runOf(runId)?.finishedAt) : true));

async function loadItems(plan, field, key) {
  const q = new URLSearchParams({ limit: String(PAGE) });
  if (pub.filter) q.set(field, pub.filter);
  if (pub.cursors.at(-1)) q.set('cursor', pub.cursors.at(-1));
  const { items, nextCursor } = await pub.api(`/publish/plans/${plan.id}/items?${q}`);
  Object.assign(pub, { items, next: nextCursor, itemsKey: key, loaded: { page: pub.cursors.length, filter: pub.filter } });
}

/** Counts the items of a finished publish (or roll back) by outcome; the API pages items but does not count outcomes. */
async function countOutcomes(plan, phase) {
  const all = [];
  let cursor = null;
  let pages = 0;
  do {
    const q = new URLSearchParams({ limit: '200' });
    if (cursor) q.set('cursor', cursor);
    const { items, nextCursor } = await pub.api(`/publish/plans/${plan.id}/items?${q}`);
    all.push(...items);
    cursor = nextCursor;
  } while (cursor && ++pages < TALLY_PAGES);
  pub.tally = {
    key: `${plan.id}:${phase}`,
    counts: { outcome: countBy(all, 'outcome'), restoreOutcome: countBy(all, 'restoreOutcome') },
    scanned: all.length,
    complete: !cursor,
  };
}

function resetItems() {
  Object.assign(pub, { filter: '', cursors: [null], items: [], next: null, itemsKey: null, loaded: null });
}

/** The plan on screen: the plan of the run on screen, else the one this page last made, else the newest. */
function shownPlan() {
  if (pub.portalId !== state.portalId) return null; // another portal chosen: its plans are read on the next refresh
  const all = pub.other ? [...pub.plans, pub.other] : pub.plans;
  const ofRun = state.runId && all.find((p) => [p.planRunId, p.publishRunId, p.restoreRunId].includes(state.runId));
  return ofRun ?? all.find((p) => p.id === pub.planId) ?? pub.plans[0] ?? null;
}

// ---------- actions ----------

/** The view's message line; `runId`: a note about that run, gone once it has finished (its results are on screen). */
function sayPublish(text, { error = false, code = null, lines = null, runId = null } = {}) {
  pub.message = { text, error, code, lines, runId };
  renderMessage();
}

function sayPublishError(e, action) {
  if (!(e instanceof ApiError)) return sayPublish(String(e.message ?? e), { error: true });
  const text = publishErrorMessage(e.code, { action, authKind: portal()?.authKind, retryAfter: e.retryAfter ?? e.details?.retryAfterSeconds, fieldErrors: e.details?.fieldErrors });
  sayPublish(text, { error: true, code: e.code, lines: e.code === 'INVALID_CSV' ? csvErrorLines(e.details) : null });
}

/** Runs one action at a time, then refreshes the page. */
async function act(what, action) {
  if (pub.busy) return;
  pub.busy = true;
  renderPublish();
  try {
    await what();
  } catch (e) {
    sayPublishError(e, action);
  } finally {
    pub.busy = false;
  }
  await pub.refreshAll();
}

/** The mode and time chosen, for a plan of `types` (null: every type). */
function modeFor(types) {
  const mode = $('publish-mode').value;
  if (mode === 'live' || (types && !types.some((t) => DRAFT_TYPES.includes(t)))) return {};
  const publishAt = $('publish-at').value ? new Date($('publish-at').value).toISOString() : undefined;
  return mode === 'schedule' ? { mode, publishAt } : { mode };
}

function chose(plan, runId) {
  pub.planId = plan.planId;
  pub.confirm = null;
  resetItems();
  pub.showRun(runId); // the plan run's progress in the run card
}

function upload() {
  const f = $('publish-file').files[0];
  if (!f) return sayPublish('Choose the edited export (a CSV file) first.', { error: true });
  const type = $('publish-type').value;
  return act(async () => {
    const q = new URLSearchParams({ portalId: state.portalId, contentType: type, plan: 'true' });
    for (const [k, v] of Object.entries(modeFor([type]))) if (v) q.set(k, v);
    const r = await pub.api(`/publish/csv?${q}`, { method: 'POST', body: f, contentType: 'text/csv' });
    sayPublish(`${f.name}: ${plural(r.edits, 'edit')} from ${plural(r.rows, 'row')}; planning ${plural(r.plan.items, 'item')} of ${typeLabel(type)} (reading them from HubSpot, nothing is written yet).`);
    $('publish-file').value = '';
    chose(r.plan, r.plan.runId);
  }, 'upload');
}

/** A plan of the portal's pending edits (`again`: of that plan's types and mode). */
function plan(again) {
  return act(async () => {
    const body = { action: 'create_publish_plan', portalId: state.portalId };
    if (again) Object.assign(body, { contentTypes: again.contentTypes, mode: again.mode }, again.mode === 'schedule' ? { publishAt: again.publishAt } : {});
    else Object.assign(body, modeFor(null), $('publish-mode').value === 'live' ? {} : { contentTypes: DRAFT_TYPES });
    const r = await pub.api('', { method: 'POST', body });
    sayPublish(`Planning ${plural(r.items, 'item')} (reading them from HubSpot, nothing is written yet).`);
    chose(r, r.runId);
  }, 'plan');
}

function ask(what) {
  pub.confirm = what;
  renderPublish();
}

function confirmed() {
  const p = shownPlan();
  const what = pub.confirm;
  pub.confirm = null;
  if (!p) return renderPublish();
  if (what === 'approve') {
    return act(async () => {
      const r = await pub.api('', { method: 'POST', body: { action: 'approve_publish_plan', planId: p.id } });
      sayPublish(`Approved: writing ${plural(p.counts.ready, 'item')} to HubSpot. Progress is shown above.`, { runId: r.publishRunId });
      resetItems();
      pub.showRun(r.publishRunId);
    }, 'approve');
  }
  if (what === 'rollback') {
    return act(async () => {
      const r = await pub.api('', { method: 'POST', body: { action: 'rollback_publish_run', runId: p.publishRunId } });
      sayPublish('Rolling back: writing the previous values back to HubSpot. Progress is shown above.', { runId: r.restoreRunId });
      resetItems();
      pub.showRun(r.restoreRunId);
    }, 'rollback');
  }
}

function discard() {
  const p = shownPlan();
  if (!p) return;
  return act(async () => {
    await pub.api('', { method: 'POST', body: { action: 'discard_publish_plan', planId: p.id } });
    sayPublish('Plan discarded: its edits are pending again.');
  }, 'discard');
}

async function audit() {
  const p = shownPlan();
  if (!p) return;
  try {
    const res = await pub.api(`/publish/plans/${p.id}/audit.csv`, { raw: true });
    const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? `publish-audit-${p.id.slice(0, 8)}.csv`;
    const url = URL.createObjectURL(await res.blob());
    const a = Object.assign(document.createElement('a'), { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    sayPublish(`Downloaded ${name}.`);
  } catch (e) {
    sayPublishError(e, 'audit');
  }
}

function page(step) {
  if (step > 0 && pub.next) pub.cursors.push(pub.next);
  else if (step < 0 && pub.cursors.length > 1) pub.cursors.pop();
  else return;
  pub.refreshAll(); // the items are read again (their key holds the page), the page shown meanwhile kept
}

function filterBy(value) {
  Object.assign(pub, { filter: value, cursors: [null] });
  pub.refreshAll();
}

// ---------- rendering ----------

function renderMessage() {
  const m = $('publish-message');
  if (pub.message?.runId && runOf(pub.message.runId)?.finishedAt) pub.message = null;
  const msg = pub.message;
  m.className = msg?.error ? 'error' : '';
  m.replaceChildren();
  if (!msg) return;
  m.append(document.createTextNode(msg.text));
  if (msg.code) m.append(node('span', { className: 'code', textContent: msg.code, title: 'Error code (for support)' }));
  if (msg.lines?.length) m.append(node('ul', {}, ...msg.lines.map((l) => node('li', { textContent: l }))));
}

export function renderPublish() {
  const card = $('publish-card');
  card.hidden = !pub.available || !state.portalId;
  if (card.hidden) return;
  const now = Date.now();
  const type = $('publish-type').value;
  const draftable = DRAFT_TYPES.includes(type);
  $('publish-mode').disabled = !draftable;
  if (!draftable) $('publish-mode').value = 'live';
  $('publish-at').hidden = $('publish-mode').value !== 'schedule';
  $('publish-upload').disabled = pub.busy;
  $('publish-pending').disabled = pub.busy;
  $('publish-plans-note').textContent = pub.plans.length ? `${plural(pub.plans.length, 'plan')} lately` : '';
  renderMessage();

  const plan = shownPlan();
  const box = $('publish-plan');
  box.hidden = !plan;
  if (!plan) return;
  const phase = phaseOf(plan);
  const field = statusField(phase);
  box.dataset.planId = plan.id;
  box.dataset.phase = phase;
  const head = planHeadline(plan, phase, now);
  const mode = plan.mode === 'draft' ? ' · draft, then live' : plan.mode === 'schedule' ? ` · scheduled for ${when(plan.publishAt, now)}` : '';
  $('publish-plan-title').textContent = `Plan · ${when(plan.createdAt, now)} · ${plan.contentTypes.map(typeLabel).join(', ')}${mode}`;
  const pill = $('publish-plan-status');
  pill.textContent = head.label;
  pill.className = `pill tone-${head.tone}`;
  pill.dataset.phase = phase;
  $('publish-plan-note').textContent = head.note ?? '';
  $('publish-plan-note').dataset.fresh = phase === 'review' && head.note?.startsWith('fresh') ? 'true' : 'false';

  // The run of the phase, as the refresh loop sees it: its progress here, the whole run in the run card.
  const runId = { planning: plan.planRunId, publishing: plan.publishRunId, published: plan.publishRunId, restoring: plan.restoreRunId, restored: plan.restoreRunId }[phase];
  const progress = $('publish-progress');
  const d = runId && state.details.get(runId);
  progress.hidden = !d;
  if (d) {
    const done = d.jobs.reduce((n, j) => n + j.done, 0);
    const total = d.jobs.reduce((n, j) => n + (j.total ?? 0), 0);
    const link = node('button', { className: 'link', textContent: state.runId === runId ? 'shown above' : 'show the run', onclick: () => pub.showRun(runId) });
    progress.replaceChildren(node('span', {}, `${kindLabel(d.run.kind)} run: `, node('b', { id: 'publish-progress-count', textContent: `${done.toLocaleString()} of ${total.toLocaleString()}` }),
      ' items handled', d.run.finishedAt ? ` · ${d.run.status.replace('_', ' ')}` : ''), link);
    progress.dataset.runId = runId;
  }

  // Counts: the plan's (planned statuses); a finished run's outcomes as counted; none while it runs.
  let counts = null;
  let total = plan.counts.total;
  if (field === 'planStatus') counts = phase === 'planning' ? null : plan.counts;
  else if (pub.tally?.key === `${plan.id}:${phase}`) counts = pub.tally.counts[field];
  if (field !== 'planStatus' && !pub.tally?.complete && counts) total = null;
  renderChips($('publish-chips'), field, counts, total, pub.filter, filterBy, { scheduled: plan.mode === 'schedule' });
  const emptyText = phase === 'planning' ? 'Reading the items from HubSpot…' : pub.filter ? 'No item with this status.' : 'No item.';
  renderItems($('publish-items'), pub.itemsKey ? pub.items : [], field, { empty: emptyText });
  Object.assign($('publish-items').dataset, { page: String(pub.itemsKey ? pub.loaded.page : ''), filter: pub.itemsKey ? pub.loaded.filter : '' });
  const pageNo = pub.cursors.length;
  $('publish-pager').hidden = pageNo === 1 && !pub.next;
  const loading = pub.loaded?.page !== pageNo; // a page asked for, not read yet
  $('publish-prev').disabled = pageNo === 1 || loading;
  $('publish-next').disabled = !pub.next || loading;
  $('publish-page-note').textContent = `page ${pageNo}`;

  // Actions of the phase.
  const approvable = phase === 'review' && plan.approvable && plan.counts.ready > 0 && head.tone === 'run';
  // What a roll back handles: the applied items and the scheduled ones (docs/publish.md).
  const tallied = pub.tally?.key === `${plan.id}:published` ? pub.tally.counts.outcome : null;
  const applied = tallied ? (tallied.applied ?? 0) + (tallied.scheduled ?? 0) : null;
  const show = (id, on, props = {}) => Object.assign($(id), { hidden: !on, disabled: pub.busy }, props);
  show('publish-approve', approvable, { textContent: `Approve: write ${plural(plan.counts.ready, 'item')}` });
  show('publish-discard', phase === 'review');
  show('publish-again', phase === 'failed' || (phase === 'review' && !approvable));
  show('publish-rollback', phase === 'published' && applied !== null && applied > 0, { textContent: `Roll back ${plural(applied ?? 0, 'item')}` });
  show('publish-audit', phase !== 'planning');
  if ((pub.confirm === 'rollback' && phase !== 'published') || (pub.confirm === 'approve' && phase !== 'review')) pub.confirm = null;
  const confirm = $('publish-confirm');
  confirm.hidden = !pub.confirm;
  confirm.dataset.what = pub.confirm ?? '';
  if (pub.confirm === 'approve') {
    $('publish-confirm-text').textContent = approveQuestion(plan);
    $('publish-confirm-yes').textContent = `Write ${plural(plan.counts.ready, 'item')}`;
  } else if (pub.confirm === 'rollback') {
    $('publish-confirm-text').textContent = rollbackQuestion(applied ?? 0);
    $('publish-confirm-yes').textContent = `Roll back ${plural(applied ?? 0, 'item')}`;
  }
  $('publish-confirm-yes').disabled = pub.busy;
}
