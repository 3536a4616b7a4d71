// The Publish view's model and words (docs/publish.md): where a plan is in its
// life (planning, a plan to review, publishing, published, rolling back,
// rolled back), how fresh it is, what each item's status or outcome is called,
// its values as shown, and every publish error code in the user's words. Pure
// functions of the HTTP API's plan and item shapes, no DOM (the view is
// publish-view.js); tests/web-publish.test.ts pins them.
import { duration, errorMessage, plural } from './status.js';

/** The content types an edit can change (HubDB tables have no editable field). */
export const EDITABLE_TYPES = ['site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags', 'hubdb_rows', 'url_redirects'];
/** The types whose edits may be written as a draft (pushed live, or scheduled) instead of live. */
export const DRAFT_TYPES = ['site_pages', 'landing_pages', 'blog_posts'];

/** A plan item's status (planStatus), as the plan calls it. */
export const PLAN_STATUS_LABELS = {
  ready: 'Ready',
  conflict: 'Conflict',
  invalid: 'Invalid',
  unchanged: 'Unchanged',
  missing: 'Missing',
};
/** A publish run's outcome per item. */
export const OUTCOME_LABELS = {
  writing: 'Writing',
  applied: 'Applied',
  scheduled: 'Scheduled',
  unchanged: 'Unchanged',
  conflict: 'Conflict',
  invalid: 'Invalid',
  failed: 'Failed',
  overwritten: 'Overwritten',
};
/** A restore run's (a roll back's) outcome per item. */
export const RESTORE_LABELS = {
  restoring: 'Restoring',
  restored: 'Restored',
  conflict: 'Conflict',
  invalid: 'Invalid',
  failed: 'Failed',
};
const TONES = {
  ready: 'run', applied: 'ok', scheduled: 'ok', restored: 'ok', unchanged: 'neutral', writing: 'run', restoring: 'run',
  conflict: 'wait', missing: 'neutral', invalid: 'bad', failed: 'bad', overwritten: 'bad', queued: 'wait',
};
export const toneOfItem = (status) => TONES[status] ?? 'neutral';

/**
 * Where the plan is: `planning`, `review` (ready, approvable or not), `failed`,
 * `discarded`, `publishing`, `published`, `restoring`, `restored`.
 * `runFinished(runId)`: whether the page has seen that run end (null: not known yet).
 */
export function planPhase(plan, runFinished = () => null) {
  if (plan.status === 'planning') return 'planning';
  if (plan.status === 'failed' || plan.status === 'discarded') return plan.status;
  if (plan.status === 'ready') return 'review';
  if (plan.restoreRunId) return runFinished(plan.restoreRunId) ? 'restored' : 'restoring';
  return runFinished(plan.publishRunId) ? 'published' : 'publishing';
}

/** Which of the item's statuses a phase shows and filters by: the plan's, the publish's outcome, or the roll back's. */
export function statusField(phase) {
  if (phase === 'publishing' || phase === 'published') return 'outcome';
  if (phase === 'restoring' || phase === 'restored') return 'restoreOutcome';
  return 'planStatus';
}
export const LABELS_OF = { planStatus: PLAN_STATUS_LABELS, outcome: OUTCOME_LABELS, restoreOutcome: RESTORE_LABELS };

/** Seconds the plan can still be approved (0 once stale); null when it has no time limit (not ready). */
export function freshSeconds(plan, now = Date.now()) {
  if (plan.status !== 'ready' || !plan.freshUntil) return null;
  return Math.max(0, (Date.parse(plan.freshUntil) - now) / 1000);
}

/** The plan's heading line: `{ label, tone, note }` for its phase. */
export function planHeadline(plan, phase, now = Date.now()) {
  const c = plan.counts;
  switch (phase) {
    case 'planning': return { label: 'Planning', tone: 'run', note: `reading ${plural(c.total, 'item')} from HubSpot (nothing is written)` };
    case 'failed': return { label: 'Plan failed', tone: 'bad', note: 'its edits are pending again: plan again' };
    case 'discarded': return { label: 'Discarded', tone: 'neutral', note: 'a newer plan replaced it, or it was discarded; its edits were planned again or are pending' };
    case 'review': {
      const left = freshSeconds(plan, now);
      if (left === 0) return { label: 'No longer fresh', tone: 'wait', note: 'HubSpot content may have changed since this plan was made: plan again' };
      if (!c.ready) return { label: 'Nothing to publish', tone: 'neutral', note: 'no item of this plan can be written' };
      return { label: 'Ready to approve', tone: 'run', note: `fresh for ${duration(left)}` };
    }
    case 'publishing': return { label: 'Publishing', tone: 'run', note: `writing ${plural(c.ready, 'item')} to HubSpot` };
    case 'published': return { label: 'Published', tone: 'ok', note: null };
    case 'restoring': return { label: 'Rolling back', tone: 'run', note: 'writing the previous values back' };
    case 'restored': return { label: 'Rolled back', tone: 'ok', note: null };
    default: return { label: phase, tone: 'neutral', note: null };
  }
}

/** A field's value as shown: text as it is, null as "(empty)", anything else as JSON. */
export function showValue(v) {
  if (v === null || v === undefined) return '(empty)';
  if (typeof v === 'string') return v === '' ? '""' : v;
  return JSON.stringify(v);
}

/**
 * One item as its rows show it: `{ status, label, tone, message, fields }`,
 * `fields` = [{ field, before, after, current }] (the patched fields; HubSpot's
 * values beside ours for a conflict: `current`).
 */
export function itemView(item, field = 'planStatus') {
  let status = item[field] ?? null;
  let label = status ? LABELS_OF[field][status] ?? status : null;
  let message = { planStatus: item.planMessage, outcome: item.outcomeMessage, restoreOutcome: item.restoreMessage }[field] ?? null;
  if (status === 'overwritten') message = overwrittenText(item);
  if (status === 'applied' && item.appliedUpdatedAt) message = `HubSpot updated it at ${new Date(item.appliedUpdatedAt).toLocaleTimeString()}`;
  if (status === 'scheduled') message = 'its draft written: HubSpot publishes it at the plan’s time';
  if (status === 'restored' && item.restoredUpdatedAt) message = `previous values back at ${new Date(item.restoredUpdatedAt).toLocaleTimeString()}`;
  if (!status && field === 'planStatus') [status, label] = ['queued', 'Being read'];
  if (!status && field === 'outcome') {
    // Not (yet) handled by the publish: a ready item waits for its batch; the others were never to be written.
    if (item.planStatus === 'ready') [status, label] = ['queued', 'Waiting to be written'];
    else [status, label, message] = ['none', 'Not written', `${PLAN_STATUS_LABELS[item.planStatus] ?? 'Not read'} when planned${item.planMessage ? `: ${item.planMessage}` : ''}`];
  }
  if (!status && field === 'restoreOutcome') {
    // Only what the publish applied is rolled back.
    [status, label] = ['none', 'Not rolled back'];
    message = item.outcome === 'overwritten' ? overwrittenText(item) : `${OUTCOME_LABELS[item.outcome] ?? 'Not written'} in the publish: nothing to roll back`;
  }
  const fields = Object.keys(item.after ?? {}).map((f) => ({
    field: f,
    before: item.before ? item.before[f] : undefined,
    after: item.after[f],
    current: item.current && f in item.current ? item.current[f] : undefined,
  }));
  return { status, label, tone: toneOfItem(status), message, fields };
}

const overwrittenText = (item) =>
  `Changed in HubSpot while we wrote it${item.overwrittenRevisionId ? `: revision ${item.overwrittenRevisionId} holds their edit (restore it in HubSpot)` : ''}`;

/** Counts of a status over items: { status: n }. */
export function countBy(items, field) {
  const out = {};
  for (const i of items) {
    const s = i[field];
    if (s) out[s] = (out[s] ?? 0) + 1;
  }
  return out;
}

/** What the Approve confirmation says. */
export function approveQuestion(plan) {
  const n = plan.counts.ready;
  const how = plan.mode === 'draft' ? ' as drafts, then pushed live'
    : plan.mode === 'schedule' ? ` as drafts, published by HubSpot at ${new Date(plan.publishAt).toLocaleString()}` : '';
  return `Write ${plural(n, 'item')} to HubSpot${how}? An item changed in HubSpot since this plan is skipped and listed as a conflict, never overwritten.`;
}

/** What the Roll back confirmation says (`applied`: the items the publish applied or scheduled). */
export function rollbackQuestion(applied) {
  return `Write the previous values of ${plural(applied, 'item')} back to HubSpot? An item changed in HubSpot since our write is skipped and listed, never overwritten.`;
}

/**
 * A publish call's error code in the user's words (the API's message is for
 * developers); any other code is status.js's. `ctx.action`: 'upload' | 'plan' | 'approve' | 'rollback' | 'discard'.
 */
export function publishErrorMessage(code, ctx = {}) {
  switch (code) {
    case 'PLAN_STALE': return 'HubSpot content may have changed since this plan was made: plan again.';
    case 'PLAN_ALREADY_APPROVED': return 'This plan was approved already: its publish run is the one shown.';
    case 'PLAN_NOT_READY': return 'This plan cannot be approved: it is still being made, it failed, or a newer plan replaced it.';
    case 'PLAN_NOTHING_READY': return 'Nothing in this plan can be written: every item is a conflict, invalid, unchanged or missing.';
    case 'PLAN_IN_PROGRESS': return 'A plan of these content types is still being made: wait for it to finish.';
    case 'PLAN_STILL_PLANNING': return 'This plan is still being made: wait for it (or stop its run) first.';
    case 'PUBLISH_IN_PROGRESS': return 'A publish or roll back of these content types is running: wait for it to finish.';
    case 'PUBLISH_RUN_NOT_FINISHED': return 'The publish is still running: roll it back once it has finished.';
    case 'ALREADY_ROLLED_BACK': return 'This publish was rolled back already.';
    case 'NOTHING_TO_ROLL_BACK': return 'This publish applied nothing, so there is nothing to roll back.';
    case 'NO_PENDING_EDITS': return ctx.action === 'upload'
      ? 'Nothing in this file differs from the stored copy, and no other edit is pending: nothing to plan.'
      : 'There are no pending edits to plan.';
    case 'TOO_MANY_EDITS': return 'Too many edits for one plan: split them into smaller files.';
    case 'EDITS_BUSY': return 'The same items were being changed at the same moment: nothing was stored. Upload the file again.';
    case 'PAYLOAD_TOO_LARGE': return 'The file is larger than an upload may be: split it by rows.';
    case 'UNSUPPORTED_MEDIA_TYPE': return 'The file must be a CSV in UTF-8 (the export as a spreadsheet saves it).';
    case 'INVALID_CSV': return 'The file was not imported, nothing was stored:';
    case 'INVALID_QUERY':
    case 'INVALID_BODY': return 'Please check the content type, the mode and the time to publish at.';
    case 'PLAN_NOT_FOUND': return 'This plan is no longer available.';
    case 'RUN_NOT_FOUND': return 'This publish is no longer available.';
    default: return errorMessage(code, ctx);
  }
}

/** An INVALID_CSV answer's errors (details.errors: {row, column, code, message}) as lines, at most `max`. */
export function csvErrorLines(details, max = 10) {
  const errors = details?.errors ?? [];
  const lines = errors.slice(0, max).map((e) => `${e.row ? `Row ${e.row}` : 'The file'}${e.column ? `, ${e.column}` : ''}: ${e.message}`);
  if (errors.length > max) lines.push(`… and ${plural(errors.length - max, 'more problem')}`);
  return lines;
}
