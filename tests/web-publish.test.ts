// The Publish view's model and words (web/publish-status.js, plain browser
// JavaScript) and the run names of a publish's three runs (web/status.js):
// where a plan is in its life, how fresh it is, what each item's status is
// called and why, what the confirmations say, and every publish error code in
// the user's words. The view itself runs in tests/browser-publish.test.ts.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';

type Fn = (...args: any[]) => any;
// Modules of the page, loaded as the browser loads them (no types of their own).
const publish = (await import(path.join(PROJECT_ROOT, 'web/publish-status.js'))) as {
  EDITABLE_TYPES: string[];
  planPhase: Fn; statusField: Fn; freshSeconds: Fn; planHeadline: Fn; itemView: Fn; showValue: Fn;
  approveQuestion: Fn; rollbackQuestion: Fn; publishErrorMessage: Fn; csvErrorLines: Fn;
};
const status = (await import(path.join(PROJECT_ROOT, 'web/status.js'))) as { errorMessage: Fn; runName: Fn; runView: Fn; stopQuestion: Fn };

const NOW = Date.parse('2026-05-02T10:00:00.000Z');
const counts = { total: 5, ready: 3, conflict: 1, invalid: 0, unchanged: 1, missing: 0 };
const plan = (fields: Record<string, unknown> = {}) => ({
  id: 'p1', status: 'ready', approvable: true, mode: 'live', publishAt: null, contentTypes: ['site_pages'], createdAt: '2026-05-02T09:50:00.000Z',
  planRunId: 'r-plan', freshUntil: '2026-05-02T10:20:00.000Z', publishRunId: null, restoreRunId: null, counts, ...fields,
});
const item = (fields: Record<string, unknown> = {}) => ({
  id: '1', contentType: 'site_pages', hubspotId: '41', before: { name: 'Old' }, after: { name: 'New' }, current: null,
  planStatus: 'ready', planMessage: null, outcome: null, outcomeMessage: null, appliedUpdatedAt: null, overwrittenRevisionId: null,
  restoreOutcome: null, restoreMessage: null, restoredUpdatedAt: null, ...fields,
});

describe('web/publish-status.js', () => {
  it('places a plan in its life: planning, review, publishing, published, rolling back, rolled back', () => {
    const finished = (ids: string[]) => (id: string) => ids.includes(id);
    expect(publish.planPhase(plan({ status: 'planning' }))).toBe('planning');
    expect(publish.planPhase(plan())).toBe('review');
    expect(publish.planPhase(plan({ status: 'failed' }))).toBe('failed');
    expect(publish.planPhase(plan({ status: 'discarded' }))).toBe('discarded');
    const approved = plan({ status: 'approved', publishRunId: 'r-pub' });
    expect(publish.planPhase(approved, finished([]))).toBe('publishing');
    expect(publish.planPhase(approved, finished(['r-pub']))).toBe('published');
    const rolledBack = { ...approved, restoreRunId: 'r-res' };
    expect(publish.planPhase(rolledBack, finished(['r-pub']))).toBe('restoring');
    expect(publish.planPhase(rolledBack, finished(['r-pub', 'r-res']))).toBe('restored');
    expect(['review', 'publishing', 'restored'].map(publish.statusField)).toEqual(['planStatus', 'outcome', 'restoreOutcome']);
  });

  it('counts a fresh plan down, and says to plan again once it is not', () => {
    expect(publish.freshSeconds(plan(), NOW)).toBe(1200);
    expect(publish.planHeadline(plan(), 'review', NOW)).toEqual({ label: 'Ready to approve', tone: 'run', note: 'fresh for 20 min' });
    expect(publish.planHeadline(plan(), 'review', NOW + 1_199_000).note).toBe('fresh for 1 s');
    const stale = publish.planHeadline(plan(), 'review', NOW + 1_200_001);
    expect(stale).toMatchObject({ label: 'No longer fresh', note: 'HubSpot content may have changed since this plan was made: plan again' });
    expect(publish.planHeadline(plan({ counts: { ...counts, ready: 0 } }), 'review', NOW).label).toBe('Nothing to publish');
    expect(publish.freshSeconds(plan({ status: 'approved' }), NOW)).toBeNull();
  });

  it('shows each item by the phase\'s status: HubSpot\'s value beside ours for a conflict, its message for an invalid one, the revision of an overwritten one', () => {
    const conflict = publish.itemView(item({ planStatus: 'conflict', current: { name: 'Theirs' }, planMessage: 'changed in HubSpot since the copy' }));
    expect(conflict).toMatchObject({ status: 'conflict', label: 'Conflict', message: 'changed in HubSpot since the copy' });
    expect(conflict.fields).toEqual([{ field: 'name', before: 'Old', after: 'New', current: 'Theirs' }]);
    expect(publish.itemView(item({ planStatus: 'invalid', before: null, planMessage: 'Property values were not valid' })))
      .toMatchObject({ label: 'Invalid', tone: 'bad', message: 'Property values were not valid' });
    expect(publish.itemView(item(), 'outcome')).toMatchObject({ status: 'queued', label: 'Waiting to be written' });
    expect(publish.itemView(item({ planStatus: 'unchanged' }), 'outcome')).toMatchObject({ status: 'none', label: 'Not written', message: 'Unchanged when planned' });
    const overwritten = publish.itemView(item({ outcome: 'overwritten', overwrittenRevisionId: '1000004' }), 'outcome');
    expect(overwritten).toMatchObject({ label: 'Overwritten', tone: 'bad' });
    expect(overwritten.message).toContain('revision 1000004');
    expect(publish.itemView(item({ outcome: 'overwritten', overwrittenRevisionId: '7' }), 'restoreOutcome'))
      .toMatchObject({ label: 'Not rolled back', message: expect.stringContaining('revision 7') });
    expect(publish.itemView(item({ outcome: 'conflict', outcomeMessage: 'changed' }), 'restoreOutcome').message).toBe('Conflict in the publish: nothing to roll back');
    expect(publish.itemView(item({ outcome: 'applied', restoreOutcome: 'restored' }), 'restoreOutcome')).toMatchObject({ label: 'Restored', tone: 'ok' });
    expect(publish.itemView(item({ outcome: 'scheduled' }), 'outcome')).toMatchObject({ label: 'Scheduled', tone: 'ok', message: expect.stringMatching(/publishes it at the plan’s time/) });
    expect(publish.itemView(item({ after: { metaDescription: null, slug: '' } })).fields.map((f: { after: unknown }) => publish.showValue(f.after))).toEqual(['(empty)', '""']);
  });

  it('names how many items a confirmation will write', () => {
    expect(publish.approveQuestion(plan())).toMatch(/^Write 3 items to HubSpot\? An item changed in HubSpot since this plan is skipped/);
    expect(publish.approveQuestion(plan({ mode: 'draft', counts: { ...counts, ready: 1 } }))).toMatch(/^Write 1 item to HubSpot as drafts, then pushed live\?/);
    expect(publish.rollbackQuestion(2)).toMatch(/^Write the previous values of 2 items back to HubSpot\?/);
  });

  it('says every publish refusal in plain words; other codes as the rest of the page says them', () => {
    expect(publish.publishErrorMessage('PLAN_STALE')).toBe('HubSpot content may have changed since this plan was made: plan again.');
    for (const code of ['PLAN_ALREADY_APPROVED', 'PLAN_NOT_READY', 'PLAN_NOTHING_READY', 'PLAN_IN_PROGRESS', 'PLAN_STILL_PLANNING', 'PUBLISH_IN_PROGRESS',
      'PUBLISH_RUN_NOT_FINISHED', 'ALREADY_ROLLED_BACK', 'NOTHING_TO_ROLL_BACK', 'NO_PENDING_EDITS', 'TOO_MANY_EDITS', 'EDITS_BUSY', 'PAYLOAD_TOO_LARGE',
      'UNSUPPORTED_MEDIA_TYPE', 'INVALID_CSV', 'PLAN_NOT_FOUND']) {
      expect(publish.publishErrorMessage(code), code).not.toBe(status.errorMessage('SOMETHING_NEW'));
      expect(publish.publishErrorMessage(code), code).not.toMatch(/[A-Z]{2,}_[A-Z]/);
    }
    expect(publish.publishErrorMessage('NO_PENDING_EDITS', { action: 'upload' })).toMatch(/^Nothing in this file differs/);
    expect(publish.publishErrorMessage('HUBSPOT_DISCONNECTED', { authKind: 'private_app' })).toBe(status.errorMessage('HUBSPOT_DISCONNECTED', { authKind: 'private_app' }));
    const errors = Array.from({ length: 12 }, (_, i) => ({ row: i + 1, column: 'hubspot_updated_at', code: 'stale', message: 'changed since the export' }));
    const lines = publish.csvErrorLines({ errors });
    expect(lines).toHaveLength(11);
    expect(lines[0]).toBe('Row 1, hubspot_updated_at: changed since the export');
    expect(lines[10]).toBe('… and 2 more problems');
    expect(publish.csvErrorLines({ errors: [{ row: null, column: null, code: 'empty_file', message: 'the file is empty' }] })).toEqual(['The file: the file is empty']);
  });

  it('offers the types an edit can change (not HubDB tables)', () => {
    expect(publish.EDITABLE_TYPES).toEqual(['site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags', 'hubdb_rows', 'url_redirects']);
  });
});

describe('web/status.js: a publish\'s runs', () => {
  const run = { id: 'r', kind: 'publish', status: 'partially_failed', createdAt: '2026-05-02T09:55:00.000Z', startedAt: '2026-05-02T09:55:01.000Z', finishedAt: '2026-05-02T09:55:09.000Z' };
  const job = { id: '1', contentType: 'site_pages', status: 'completed', done: 4, total: 4, startedAt: run.startedAt, finishedAt: run.finishedAt, result: null, lastError: null, attempts: 1 };

  it('names plan, publish and restore runs by their kind', () => {
    for (const [kind, name] of [['plan', 'Plan'], ['publish', 'Publish'], ['restore', 'Restore'], ['fetch', 'Fetch'], ['export', 'Export']]) {
      expect(status.runName({ ...run, kind }, NOW)).toMatch(new RegExp(`^${name} · today \\d\\d?:\\d\\d`));
    }
  });

  it('asks before Stop in the words of the run\'s kind', () => {
    expect(status.stopQuestion('publish')).toMatch(/^Stop this publish\? What is written to HubSpot stays written/);
    expect(status.stopQuestion('restore')).toMatch(/^Stop this roll back\?/);
    expect(status.stopQuestion('plan')).toMatch(/^Stop this plan\? Nothing is written to HubSpot/);
    expect(status.stopQuestion('fetch')).toMatch(/^Stop this sync\? What it has fetched so far is kept/);
    expect(status.stopQuestion('export')).toMatch(/^Stop this export\?/);
  });

  it('a finished publish or restore run shows its own status (settled by its items), not its jobs\'', () => {
    expect(status.runView(run, [job])).toMatchObject({ status: 'partially_failed', finished: true });
    expect(status.runView({ ...run, kind: 'restore', status: 'failed' }, [job])).toMatchObject({ status: 'failed' });
    expect(status.runView({ ...run, finishedAt: null, status: 'running' }, [{ ...job, status: 'running' }])).toMatchObject({ status: 'running' });
    expect(status.runView({ ...run, kind: 'fetch' }, [job])).toMatchObject({ status: 'completed' }); // a fetch's status is its jobs'
  });
});
