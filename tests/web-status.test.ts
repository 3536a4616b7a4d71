// The progress page's status model (web/status.js, plain browser JavaScript)
// against fixtures of the HTTP API's runs and jobs: every view shows the
// status this module derives, so here is where "pending while jobs run",
// "stopped at 300/300", the waiting reasons, rates for small portals and the
// user-facing error messages are pinned.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { CONTENT_TYPES } from '../shared/content-types.ts';

type Job = { id: string; contentType: string; status: string; done: number; total: number | null; startedAt: string | null; finishedAt: string | null; result: unknown; lastError: string | null; attempts: number };
type Run = Record<string, unknown> & { kind: string };
interface StatusModule {
  TYPE_LABELS: Record<string, string>;
  runView(run: Run, jobs: Job[] | null, ctx?: { fetchInFlight?: Set<string> }): { status: string; label: string; reason: string | null; finished: boolean };
  jobView(job: Job, kind: string, ctx?: { fetchInFlight?: Set<string> }): { status: string; label: string; reason: string | null };
  rateAndEta(job: Job, samples?: { t: number; done: number }[], now?: number): { rate: number | null; eta: number | null };
  throughputSeries(jobs: Job[], samples?: Map<string, { t: number; done: number; pages: number }[]>, now?: number, buckets?: number): { t: number; items: number; requests: number }[];
  errorMessage(code: string, ctx?: { authKind?: string }): string;
  jobErrorMessage(lastError: string, ctx?: { authKind?: string }): string | null;
  runName(run: Run, now?: number): string;
  itemsOf(run: Run, jobs: Job[]): { done: number; total: number | null };
  duration(seconds: number): string;
}

// A .js module of the page, loaded as the browser loads it (no types of its own).
const STATUS_JS = path.join(PROJECT_ROOT, 'web/status.js');
const status = (await import(STATUS_JS)) as StatusModule;
const fixtures = JSON.parse(await readFile(path.join(PROJECT_ROOT, 'tests/fixtures/web-status-runs.json'), 'utf8')) as {
  cases: { name: string; run: Run; jobs: Job[]; fetchInFlight?: string[]; expect: { status: string; reason?: string; jobs: string[]; jobLabels?: string[] } }[];
};

describe('web/status.js', () => {
  for (const c of fixtures.cases) {
    it(`derives the display status: ${c.name}`, () => {
      const ctx = { fetchInFlight: new Set(c.fetchInFlight ?? []) };
      const v = status.runView(c.run, c.jobs, ctx);
      expect(v.status).toBe(c.expect.status);
      if (c.expect.reason) {
        expect(v.reason).toMatch(new RegExp(`^${c.expect.reason.replace(/[()]/g, '\\$&')}`));
        expect(v.label.toLowerCase()).toContain(c.expect.reason.toLowerCase());
      }
      expect(c.jobs.map((j) => status.jobView(j, c.run.kind, ctx).status)).toEqual(c.expect.jobs);
      if (c.expect.jobLabels) expect(c.jobs.map((j) => status.jobView(j, c.run.kind, ctx).label)).toEqual(c.expect.jobLabels);
      // The runs list shows a run without its jobs only when they are gone: then the run's own counters decide.
      if (!c.jobs.length) expect(status.runView(c.run, null).status).toBe(c.expect.status);
    });
  }

  it('the run row alone (no jobs) never says pending for a run that has started', () => {
    const run = { ...fixtures.cases[2]!.run };
    expect(status.runView(run, null).status).toBe('running');
    expect(status.runView({ ...run, status: 'pending', startedAt: null, itemsDone: 5 }, null).status).toBe('running');
    expect(status.runView({ ...run, status: 'pending', startedAt: null, itemsDone: 0 }, null).status).toBe('queued');
    expect(status.runView({ ...run, waitingReason: "waiting for HubSpot's daily limit until 2026-05-03T04:00:00.000Z" }, null, { now: Date.parse('2026-05-03T01:00:00Z') } as never).reason)
      .toMatch(/^waiting for HubSpot's daily limit \(until /);
  });

  it('an export created while its fetch was adding items never shows more done than its total', () => {
    const run = fixtures.cases[4]!.run;
    const job = (status_: string, done: number, total: number): Job => ({ id: '9', contentType: 'site_pages', status: status_, attempts: 1, done, total, startedAt: null, finishedAt: null, result: null, lastError: null });
    expect(status.itemsOf(run, [job('completed', 300, 0), job('completed', 60, 60)])).toEqual({ done: 360, total: 360 });
    expect(status.itemsOf(run, [job('running', 300, 100)])).toEqual({ done: 300, total: null });
  });

  it('labels every content type for people', () => {
    expect(Object.keys(status.TYPE_LABELS).sort()).toEqual([...CONTENT_TYPES].sort());
    expect(status.TYPE_LABELS.site_pages).toBe('Site pages');
    expect(status.TYPE_LABELS.hubdb_rows).toBe('HubDB rows');
  });

  it('gives a small portal a rate: a job seen once, or only finished, has its average', () => {
    const now = Date.parse('2026-05-02T10:00:03.000Z');
    const running: Job = { id: '1', contentType: 'site_pages', status: 'running', attempts: 1, done: 200, total: 300, startedAt: '2026-05-02T10:00:01.000Z', finishedAt: null, result: { pages: 2 }, lastError: null };
    const r = status.rateAndEta(running, [], now);
    expect(r.rate).toBeCloseTo(100, 5); // 200 items in 2 s
    expect(r.eta).toBeCloseTo(1, 5);
    const completed = { ...running, status: 'completed', done: 300, finishedAt: '2026-05-02T10:00:04.000Z' };
    expect(status.rateAndEta(completed, [], now)).toEqual({ rate: 100, eta: 0 });
    expect(status.rateAndEta({ ...running, status: 'pending', startedAt: null }, [], now)).toEqual({ rate: null, eta: null });
    // Seen by the page: the last 15 s decide (it slowed down to 10/s; its average since the start is 3.3/s).
    const samples = [{ t: now - 10_000, done: 100 }, { t: now - 5_000, done: 150 }];
    const slow = status.rateAndEta({ ...running, startedAt: new Date(now - 60_000).toISOString() }, samples, now);
    expect(slow.rate).toBeCloseTo(10, 5);
    expect(slow.eta).toBeCloseTo(10, 5);
  });

  it('charts throughput and HubSpot requests over the run: the items add up to what was done', () => {
    const jobs: Job[] = fixtures.cases[5]!.jobs.map((j) => ({ ...j, result: { pages: j.done / 100 } }));
    const series = status.throughputSeries(jobs, new Map(), Date.now(), 20);
    expect(series).toHaveLength(20);
    const span = (series[1]!.t - series[0]!.t) / 1000;
    const items = series.reduce((s, p) => s + p.items * span, 0);
    const requests = series.reduce((s, p) => s + p.requests * span, 0);
    expect(items).toBeCloseTo(400, 3);
    expect(requests).toBeCloseTo(4, 3);
    expect(Math.max(...series.map((p) => p.items))).toBeGreaterThan(0);
  });

  it('speaks to users: a rejected private-app token does not talk about OAuth; every code has its own words', () => {
    const token = status.errorMessage('HUBSPOT_TOKEN_REJECTED', { authKind: 'private_app' });
    expect(token).toMatch(/private app token/);
    expect(token).not.toMatch(/OAuth|reconnect the app/i);
    expect(status.errorMessage('HUBSPOT_AUTH_FAILED', { authKind: 'private_app' })).toMatch(/new private app token/);
    expect(status.errorMessage('HUBSPOT_AUTH_FAILED', { authKind: 'oauth' })).toMatch(/Connect with HubSpot again/);
    expect(status.errorMessage('SOMETHING_NEW')).toMatch(/Nothing was changed/);
    const authError = fixtures.cases[6]!.jobs[0]!.lastError!;
    expect(status.jobErrorMessage(authError, { authKind: 'private_app' })).toMatch(/private app token/);
    expect(status.jobErrorMessage(authError, { authKind: 'private_app' })).not.toMatch(/OAuth/);
    expect(status.jobErrorMessage('HubSpot refused access: the connection is missing the scope "hubdb" (MISSING_SCOPES).', { authKind: 'private_app' }))
      .toMatch(/lacks the “hubdb” scope/);
    for (const m of [token, status.jobErrorMessage('HubSpot answered 503 three times')!]) expect(m).not.toMatch(/^[A-Z_]+:/);
  });

  it('names runs by kind and time, and durations in words', () => {
    const run = fixtures.cases[0]!.run;
    expect(status.runName(run, Date.parse(run.createdAt as string) + 60_000)).toMatch(/^Fetch · today \d\d?:\d\d/);
    const older = status.runName({ ...run, kind: 'export' }, Date.parse(run.createdAt as string) + 3 * 86_400_000);
    expect(older).toMatch(/^Export · /);
    expect(older).not.toMatch(/today|yesterday/);
    expect(older).toMatch(/\d\d?:\d\d/);
    expect(status.duration(4)).toBe('4 s');
    expect(status.duration(125)).toBe('2 min 5 s');
    expect(status.duration(3720)).toBe('1 h 2 min');
  });
});

describe('web/status.js: a job retrying after failures', () => {
  // The moment of the issue: HubSpot down, a retry due at 01:59:00, the job giving up at 02:28 (30 min after its first failure).
  const now = Date.parse('2026-05-02T01:58:45Z');
  const error = 'HubSpot is temporarily unavailable: connection failed (after 5 attempts).';
  const run: Run = { id: 'r1', kind: 'fetch', status: 'running', startedAt: '2026-05-02T01:57:00Z', createdAt: '2026-05-02T01:57:00Z', finishedAt: null };
  const job = (over: Record<string, unknown> = {}) => ({
    id: '1', contentType: 'site_pages', status: 'pending', attempts: 0, done: 100, total: 300, startedAt: '2026-05-02T01:57:01Z', finishedAt: null,
    result: null, lastError: error, waitingReason: 'retrying after a failure until 2026-05-02T01:59:00.000Z', waitingUntil: '2026-05-02T01:59:00.000Z',
    retryingUntil: '2026-05-02T02:28:00.000Z', ...over,
  }) as unknown as Job;
  const views = (jobs: Job[], at = now) => {
    const v = status.runView(run, jobs, { now: at } as never);
    const js = jobs.map((j) => status.jobView(j, 'fetch', { now: at } as never));
    return { run: v, jobs: js, words: [v.label, v.reason, ...js.flatMap((x) => [x.label, x.reason])].filter(Boolean).join(' | ') };
  };

  it('says HubSpot is not answering and until when it retries; never "given up" while a retry is scheduled', () => {
    const { run: r, jobs: [pending], words } = views([job()]);
    expect(r).toMatchObject({ status: 'waiting', finished: false });
    expect(r.reason).toMatch(/^HubSpot is not answering; retrying until \d\d?:28/);
    expect(pending).toMatchObject({ status: 'waiting', label: 'Retrying in 15 s' });
    expect(words).not.toMatch(/given up|gave up/i);
    // Trying again (running): the run still says it, and the row says it tries.
    const both = views([job({ status: 'running', waitingReason: null, waitingUntil: null }), job({ id: '2', contentType: 'blog_posts' })]);
    expect(both.run).toMatchObject({ status: 'running' });
    expect(both.run.reason).toMatch(/^HubSpot is not answering; retrying until /);
    expect(both.jobs[0]).toMatchObject({ status: 'running', label: 'Trying again' });
    expect(both.words).not.toMatch(/given up|gave up/i);
    // The same row from Realtime (no waitingReason text, the row's run_after as waitingUntil): the same words.
    expect(views([job({ waitingReason: null })]).words).toBe(views([job()]).words);
  });

  it('never shows a time that has passed: a due retry is "soon", a give-up time reached is the last try', () => {
    const due = views([job()], Date.parse('2026-05-02T01:59:02Z'));
    expect(due.jobs[0]!.label).toBe('Retrying soon');
    const last = views([job({ waitingUntil: '2026-05-02T02:28:00.000Z', waitingReason: 'retrying after a failure until 2026-05-02T02:28:00.000Z' })], Date.parse('2026-05-02T02:28:30Z'));
    expect(last.run.reason).toBe('HubSpot is not answering; trying one last time');
    expect(last.words).not.toMatch(/\d\d:\d\d/);
    // A park whose time has passed says what it waited for, without the time.
    const parked = status.runView({ ...run, waitingReason: "waiting for HubSpot's daily limit until 2026-05-02T01:58:00.000Z" }, null, { now } as never);
    expect(parked.reason).toBe("waiting for HubSpot's daily limit");
    expect(status.runView({ ...run, waitingReason: "waiting for HubSpot's daily limit until 2026-05-02T04:00:00.000Z" }, null, { now } as never).reason)
      .toMatch(/^waiting for HubSpot's daily limit \(until [^)]*\d:00[^)]*\)$/);
  });

  it('a job that gave up says so, and how to try it again', () => {
    expect(status.jobErrorMessage(error)).toMatch(/did not answer for too long, so this type was given up/);
    expect(status.jobErrorMessage(error)).toMatch(/Retry failed types/);
    const failed = views([job({ status: 'failed', finishedAt: '2026-05-02T02:28:05Z', waitingReason: null, waitingUntil: null, retryingUntil: null })]);
    expect(failed.run).toMatchObject({ status: 'failed', reason: null });
  });
});

describe('web/status.js: syncs, schedules and HubSpot requests', () => {
  // (the functions below are not in StatusModule's type: read loosely)
  const s = status as unknown as Record<string, (...args: never[]) => unknown>;
  const call = <T>(name: string, ...args: unknown[]) => (s[name] as unknown as (...a: unknown[]) => T)(...args);

  it('names the fetch mode and says how many items were checked and changed, and a failed sync as failed', () => {
    expect(call('fetchModeLabel', 'incremental')).toBe('changes only');
    expect(call('fetchModeLabel', 'full')).toBe('full');
    const quiet = call<Record<string, unknown>>('lastSyncView', { mode: 'full', status: 'completed', trigger: 'user', checked: 41705, changes: { added: 0, updated: 0, deleted: 0 } });
    expect(quiet).toMatchObject({ mode: 'full', status: 'completed', scheduled: false, changes: '41,705 checked, 0 changed' });
    const busy = call<Record<string, unknown>>('lastSyncView', { mode: 'incremental', status: 'partially_failed', trigger: 'schedule', checked: 12, changes: { added: 2, updated: 3, deleted: 1 } });
    expect(busy).toMatchObject({ mode: 'changes only', tone: 'bad', label: 'Finished with errors', scheduled: true, changes: '12 checked, 6 changed (2 new, 3 updated, 1 deleted)' });
    expect(call<Record<string, unknown>>('lastSyncView', { mode: 'full', status: 'failed', changes: { added: 0, updated: 0, deleted: 0 } })).toMatchObject({ label: 'Failed', tone: 'bad' });
    expect(call('lastSyncView', null)).toBeNull();
  });

  it('words a schedule', () => {
    expect(call('scheduleText', { incrementalEveryMinutes: 15, fullEveryMinutes: 1440, paused: false })).toBe('changes every 15 min · full every 1 day');
    expect(call('scheduleText', { incrementalEveryMinutes: null, fullEveryMinutes: 2880, paused: true })).toBe('full every 2 days (paused)');
    expect(call('scheduleText', null)).toBe('no sync schedule');
  });

  it('draws requests per 10-s window from the budget\'s counts, every window present, and the limit per 10 s', () => {
    const t0 = Date.parse('2026-05-01T10:00:00Z');
    const pts = call<{ t: number; v: number }[]>('requestPoints', [{ windowStart: '2026-05-01T10:00:10.000Z', requests: 7 }, { windowStart: '2026-05-01T10:00:30.000Z', requests: 3 }], t0 + 4_000, t0 + 35_000);
    expect(pts.map((p) => p.v)).toEqual([0, 0, 7, 0, 3]);
    expect([pts[0]!.t, pts[pts.length - 1]!.t]).toEqual([t0 + 4_000, t0 + 35_000]); // the whole run: a 31 s run's chart spans 31 s
    expect(Math.max(...pts.map((p) => p.v))).toBe(7); // never more than a window's count
    // A run inside one window still draws a line: its start and end at that window's count.
    expect(call<{ t: number; v: number }[]>('requestPoints', [{ windowStart: '2026-05-01T10:00:10.000Z', requests: 7 }], t0 + 11_000, t0 + 14_000)).toEqual([{ t: t0 + 11_000, v: 7 }, { t: t0 + 14_000, v: 7 }]);
    expect(call('limitPer10s', { maxPerInterval: 190, intervalMs: 10_000 })).toBe(190);
    expect(call('limitPer10s', { maxPerInterval: 100, intervalMs: 1_000 })).toBe(1000);
    expect(call('limitPer10s', null)).toBeNull();
  });

  it('says when a full HubSpot window ends, and nothing once it has', () => {
    const now = Date.parse('2026-05-01T10:00:00Z');
    expect(call('rateWindowReason', { fullUntil: '2026-05-01T10:00:06Z' }, now)).toMatch(/^waiting for HubSpot's 10-s window \(until .+\)$/);
    expect(call('rateWindowReason', { fullUntil: '2026-05-01T09:59:59Z' }, now)).toBeNull();
    expect(call('rateWindowReason', { fullUntil: null }, now)).toBeNull();
  });
});
