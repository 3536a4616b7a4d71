// Bad input to the SQL API: a clear error (SQLSTATE + message) and nothing written.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../shared/db.ts';
import { claimNextJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { useTestDatabase } from './support/database.ts';
import { databaseDigest, pgError, seedRun, tableCounts } from './support/queue-fixtures.ts';

const db = useTestDatabase();

let portalId: string;
let userId: string;
let held: ClaimedJob;

beforeAll(async () => {
  const seeded = await seedRun(db.sql, { types: ['site_pages', 'blog_posts'] });
  ({ portalId, userId } = seeded);
  held = (await claimNextJob(db.sql, 'holder'))!;
});

type Case = [label: string, query: (sql: Sql) => Promise<unknown>, code: string, message: RegExp];

/** Every case fails with its SQLSTATE and message, and leaves every table exactly as it was. */
async function expectRejected(cases: Case[]) {
  const counts = await tableCounts(db.sql);
  const digest = await databaseDigest(db.sql);
  for (const [label, query, code, message] of cases) {
    const err = await pgError(() => query(db.sql)).catch((e: Error) => ({ code: `no error (${e.message})`, message: label }));
    expect({ label, code: err.code }).toEqual({ label, code });
    expect(err.message, label).toMatch(message);
  }
  expect(await tableCounts(db.sql)).toEqual(counts);
  expect(await databaseDigest(db.sql)).toBe(digest);
}

const ALL = ['site_pages', 'landing_pages', 'blog_posts', 'blog_authors', 'blog_tags', 'hubdb_tables', 'hubdb_rows', 'url_redirects'];

describe('create_run', () => {
  it('rejects unknown kinds and content types, NULLs, bad totals and limits', async () => {
    const run = (kind: string | null, types: (string | null)[] | null, totals: number[] | null = null, maxAttempts: number | null = null, lease: number | null = null, portal: string | null = portalId) =>
      (sql: Sql) => sql`select * from public.create_run(${portal}, ${userId}, ${kind}, ${types as string[]}::text[], ${totals}::integer[], ${maxAttempts}::integer, ${lease}::integer)`;
    await expectRejected([
      ['unknown kind', run('import', ['site_pages']), '22023', /unknown job kind "import"/],
      ['unknown type', run('fetch', ['site_pages', 'emails']), '22023', /content types must be 1-8 distinct known types/],
      ['duplicate types', run('fetch', ['url_redirects', 'url_redirects']), '22023', /distinct known types/],
      ['empty types', run('fetch', []), '22023', /distinct known types/],
      ['null type in array', run('fetch', ['site_pages', null]), '22023', /distinct known types/],
      ['nine types', run('fetch', [...ALL, 'site_pages']), '22023', /distinct known types/],
      ['null kind', run(null, ['site_pages']), '22004', /required/],
      ['null types', run('fetch', null), '22004', /required/],
      ['null portal', run('fetch', ['url_redirects'], null, null, null, null), '22004', /required/],
      ['negative total', run('fetch', ['url_redirects', 'hubdb_rows'], [3, -1]), '22023', /totals must be non-negative/],
      ['totals length', run('fetch', ['url_redirects', 'hubdb_rows'], [3]), '22023', /one per content type/],
      ['max attempts 0', run('fetch', ['url_redirects'], null, 0), '22023', /max_attempts must be between 1 and 100/],
      ['max attempts 101', run('fetch', ['url_redirects'], null, 101), '22023', /max_attempts/],
      ['lease 0', run('fetch', ['url_redirects'], null, null, 0), '22023', /lease_seconds must be between 1 and 3600/],
      ['lease 3601', run('fetch', ['url_redirects'], null, null, 3601), '22023', /lease_seconds/],
      ['unknown portal', run('fetch', ['url_redirects'], null, null, null, '00000000-0000-0000-0000-000000000001'), 'P0002', /portal .* not found/],
      ['unknown requester', (sql) => sql`select * from public.create_run(${portalId}, '00000000-0000-0000-0000-000000000002', 'fetch', '{url_redirects}')`, '23503', /requested_by/],
    ]);
  });
});

describe('claiming', () => {
  it('rejects bad worker ids, limits and kinds', async () => {
    await expectRejected([
      ['max_jobs 0', (sql) => sql`select * from public.claim_jobs('w', 0)`, '22023', /max_jobs must be between 1 and 1000, got 0/],
      ['max_jobs negative', (sql) => sql`select * from public.claim_jobs('w', -5)`, '22023', /max_jobs/],
      ['max_jobs null', (sql) => sql`select * from public.claim_jobs('w', null)`, '22023', /max_jobs/],
      ['max_jobs 1001', (sql) => sql`select * from public.claim_jobs('w', 1001)`, '22023', /max_jobs/],
      ['empty worker', (sql) => sql`select * from queue_test.claim_next_job('')`, '22023', /worker_id must be 1-200 characters/],
      ['null worker', (sql) => sql`select * from public.claim_jobs(null, 1)`, '22023', /worker_id/],
      ['long worker', (sql) => sql`select * from queue_test.claim_next_job(${'w'.repeat(201)})`, '22023', /worker_id/],
      ['unknown kind', (sql) => sql`select * from queue_test.claim_next_job('w', '{fetch,import}')`, '22023', /unknown job kind/],
      ['null kind', (sql) => sql`select * from public.claim_jobs('w', 1, array[null]::text[])`, '22023', /unknown job kind/],
      ['claim-next bad worker', (sql) => sql`select * from queue_test.complete_job_and_claim_next(${held.id}, ${held.fencingToken}, '')`, '22023', /worker_id/],
    ]);
    // None of that claimed or completed anything: the held job is still held, the other still pending.
    const rows = await db.sql`select status, count(*)::int as n from public.jobs group by status order by status`;
    expect(rows.map((r) => [r.status, r.n])).toEqual([['pending', 1], ['running', 1]]);
  });
});

describe('holder calls', () => {
  it('reject negative progress, missing errors and mismatched batches', async () => {
    const [id, token] = [held.id, held.fencingToken];
    await expectRejected([
      ['negative done', (sql) => sql`select public.heartbeat_job(${id}, ${token}, -1)`, '22023', /progress must be non-negative/],
      ['negative total', (sql) => sql`select public.heartbeat_job(${id}, ${token}, 1, -1)`, '22023', /progress must be non-negative/],
      ['null error', (sql) => sql`select public.fail_job(${id}, ${token}, null, true)`, '22004', /error and retryable are required/],
      ['null retryable', (sql) => sql`select public.fail_job(${id}, ${token}, 'x', null)`, '22004', /required/],
      ['batch length', (sql) => sql`select public.complete_jobs(array[${id}]::bigint[], array[${token}, ${token}]::bigint[])`, '22023', /same length/],
      ['batch null', (sql) => sql`select public.complete_jobs(null, null)`, '22023', /same length/],
      ['release negative', (sql) => sql`select public.release_job(${id}, ${token}, -3)`, '22023', /progress must be non-negative/],
    ]);
  });

  it('save_fetched_page rejects malformed pages and writes no item of them', async () => {
    const [id, token] = [held.id, held.fencingToken];
    const save = (items: unknown, total: number | null = null) =>
      (sql: Sql) => sql`select queue_test.save_fetched_page(${id}, ${token}, ${items === null ? null : sql.json(items as never)}, null, ${total})`;
    await expectRejected([
      ['items null', save(null), '22023', /items must be a JSON array/],
      ['items object', save({ id: 'x' }), '22023', /items must be a JSON array/],
      ['item without id', save([{ id: 'ok', data: {} }, { data: {} }]), '22023', /every item needs a string id \(1-200 characters\) and an object data/],
      ['numeric id', save([{ id: 7, data: {} }]), '22023', /string id/],
      ['null id', save([{ id: null, data: {} }]), '22023', /string id/],
      ['empty id', save([{ id: '', data: {} }]), '22023', /string id \(1-200 characters\)/],
      ['long id', save([{ id: 'x'.repeat(201), data: {} }]), '22023', /string id/],
      ['missing data', save([{ id: 'ok', data: {} }, { id: 'x' }]), '22023', /object data/],
      ['array data', save([{ id: 'x', data: [] }]), '22023', /object data/],
      ['scalar item', save(['x']), '22023', /string id/],
      ['bad updatedAt', save([{ id: 'x', updatedAt: 'not a date', data: {} }]), '22007', /invalid input syntax for type timestamp/],
      ['negative total', save([], -1), '22023', /progress_total must be non-negative/],
    ]);
  });
});

describe('park_job and retention', () => {
  it('reject missing or out-of-range times, reasons and retention arguments', async () => {
    const [id, token] = [held.id, held.fencingToken];
    const park = (until: string | null, reason: string | null) =>
      (sql: Sql) => sql`select public.park_job(${id}, ${token}, ${until}::timestamptz, ${reason})`;
    await expectRejected([
      ['park null until', park(null, 'daily limit'), '22004', /until and reason are required/],
      ['park null reason', park('2099-01-01T00:00:00Z', null), '22004', /required/],
      ['park in the past', park('2000-01-01T00:00:00Z', 'daily limit'), '22023', /until must be in the future and at most 7 days ahead/],
      ['park too far', park('2099-01-01T00:00:00Z', 'daily limit'), '22023', /at most 7 days ahead/],
      ['park empty reason', (sql) => sql`select public.park_job(${id}, ${token}, now() + interval '1 hour', '')`, '22023', /reason must be 1-500 characters/],
      ['park long reason', (sql) => sql`select public.park_job(${id}, ${token}, now() + interval '1 hour', ${'x'.repeat(501)})`, '22023', /reason/],
      ['prune negative age', (sql) => sql`select public.prune_queue_history(interval '-1 day')`, '22023', /non-negative age and a batch size of 1-100000/],
      ['prune batch 0', (sql) => sql`select public.prune_queue_history(interval '1 day', 0)`, '22023', /batch size/],
      ['prune batch too big', (sql) => sql`select public.prune_queue_history(null, 100001)`, '22023', /batch size/],
    ]);
  });
});

describe('table invariants (the CHECKs kept) and the guards that moved into functions', () => {
  it('a direct write that breaks the state machine is refused by the table', async () => {
    const [job] = await db.sql`select id from public.jobs where status = 'pending' limit 1`;
    const [run] = await db.sql`select id from public.runs limit 1`;
    const jobId = String(job!.id);
    const runId = run!.id as string;
    await expectRejected([
      ['unknown job status', (sql) => sql`update public.jobs set status = 'paused' where id = ${jobId}`, '23514', /jobs_finished_iff_terminal/],
      ['finished but pending', (sql) => sql`update public.jobs set finished_at = now() where id = ${jobId}`, '23514', /jobs_finished_iff_terminal/],
      ['completed, not finished', (sql) => sql`update public.jobs set status = 'completed' where id = ${jobId}`, '23514', /jobs_finished_iff_terminal/],
      ['running without a lease', (sql) => sql`update public.jobs set status = 'running', worker_id = 'w', fencing_token = 1 where id = ${jobId}`, '23514', /jobs_running_has_lease/],
      ['pending with a lease', (sql) => sql`update public.jobs set lease_expires_at = now(), worker_id = 'w', fencing_token = 1 where id = ${jobId}`, '23514', /jobs_running_has_lease/],
      ['attempts over max', (sql) => sql`update public.jobs set attempts = max_attempts + 1 where id = ${jobId}`, '23514', /jobs_attempts_within_max/],
      ['negative attempts', (sql) => sql`update public.jobs set attempts = -1 where id = ${jobId}`, '23514', /jobs_attempts_within_max/],
      ['unknown content type', (sql) => sql`update public.jobs set content_type = 'emails' where id = ${jobId}`, '23503', /jobs_content_type_fkey/],
      ['unknown run status', (sql) => sql`update public.runs set status = 'paused' where id = ${runId}`, '23514', /runs_finished_iff_terminal/],
      ['run finished while running', (sql) => sql`update public.runs set finished_at = now() where id = ${runId}`, '23514', /runs_finished_iff_terminal/],
      ['run counts over total', (sql) => sql`update public.runs set jobs_completed = jobs_total + 1 where id = ${runId}`, '23514', /runs_counts_within_total/],
      ['content of an unknown type', (sql) => sql`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data)
                                                 values (${portalId}, ${userId}, 'emails', 'x', '{}')`, '23503', /hubspot_content_content_type_fkey/],
    ]);
  });

  it('fail_job bounds the stored error (the length CHECK moved into the function)', async () => {
    const { runId } = await seedRun(db.sql, { types: ['url_redirects'] });
    const job = (await claimNextJob(db.sql, 'long-error', ['fetch']))!;
    expect(job.runId).toBe(runId);
    const [ok] = await db.sql`select public.fail_job(${job.id}, ${job.fencingToken}, ${'e'.repeat(10_000)}, true) as ok`;
    expect(ok!.ok).toBe('pending');
    const [row] = await db.sql`select char_length(last_error) as n, status from public.jobs where id = ${job.id}`;
    expect(row).toEqual({ n: 4000, status: 'pending' });
    await db.sql`select public.stop_run(${runId})`;
  });
});

/** A well-formed sealed value (the database checks its form; only the functions can open it). */
const SEALED = 'v1.k1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA';

/** connect_portal_with_tokens with a private-app token unless told otherwise. */
function connect(owner: string, hubspotPortalId: number, name: string | null,
  o: { kind?: string; keyId?: string | null; token?: string; refresh?: string; lifetime?: number } = {}) {
  return (sql: Sql) => sql`select public.connect_portal_with_tokens(${owner}, ${hubspotPortalId}, ${name}, ${o.kind ?? 'private_app'},
    ${o.keyId === undefined ? 'k1' : o.keyId}, ${o.token ?? SEALED}, ${o.refresh ?? null}, ${o.lifetime ?? null}::integer, null, null, null)`;
}

describe('operations and portals', () => {
  it('reject bad budgets, retention arguments and portal data', async () => {
    await expectRejected([
      ['budget max 0', (sql) => sql`select * from public.acquire_hubspot_requests(1, 1, 0, 1000)`, '22023', /positive max and window/],
      ['budget window 0', (sql) => sql`select * from public.acquire_hubspot_requests(1, 1, 10, 0)`, '22023', /positive max and window/],
      ['budget window negative', (sql) => sql`select * from public.acquire_hubspot_requests(1, 1, 10, -5)`, '22023', /positive/],
      ['budget null portal', (sql) => sql`select * from public.acquire_hubspot_requests(null, 1, 10, 1000)`, '22023', /portal id/],
      ['budget count 0', (sql) => sql`select * from public.acquire_hubspot_requests(1, 0, 10, 1000)`, '22023', /count must be between 1 and 1000/],
      ['retention negative age', (sql) => sql`select public.delete_finished_jobs(interval '-1 day')`, '22023', /non-negative age/],
      ['retention batch 0', (sql) => sql`select public.delete_finished_jobs(interval '1 day', 0)`, '22023', /batch size of 1-100000/],
      ['retention null', (sql) => sql`select public.delete_finished_jobs(null)`, '22023', /non-negative age/],
      ['portal nulls', connect(null as unknown as string, 5, 'x'), '22004', /required/], // (a null name keeps or defaults it)
      ['portal no key id', connect(userId, 5, 'x', { keyId: null }), '22004', /required/],
      ['portal id 0', connect(userId, 0, 'x'), '23514', /hubspot_portal_id/],
      ['portal empty name', connect(userId, 5, ''), '23514', /portals_name_check/],
      ['portal name with a zero-width space', connect(userId, 5, 'Acme\u200BCorp'), '23514', /portals_name_visible/],
      ['portal name with a control character', connect(userId, 5, 'Acme\u0007'), '23514', /portals_name_visible/],
      ['portal name with a bidi override', connect(userId, 5, 'Acme\u202Egnp.exe'), '23514', /portals_name_visible/],
      ['portal empty token', connect(userId, 6, 'x', { token: '' }), '23514', /portal_credentials_sealed_form/],
      ['portal token in clear', connect(userId, 6, 'x', { token: 'pat-na1-plaintext' }), '23514', /portal_credentials_sealed_form/],
      ['portal bad key id', connect(userId, 6, 'x', { keyId: 'no spaces' }), '23514', /portal_credentials_key_id_form/],
      ['portal unknown kind', connect(userId, 6, 'x', { kind: 'api_key' }), '22023', /kind must be/],
      ['portal OAuth without refresh token', connect(userId, 6, 'x', { kind: 'oauth', lifetime: 1800 }), '22023', /sealed refresh token/],
      ['portal OAuth without lifetime', connect(userId, 6, 'x', { kind: 'oauth', refresh: SEALED }), '22023', /positive lifetime/],
      ['portal private app with refresh token', connect(userId, 6, 'x', { refresh: SEALED }), '22023', /no refresh token/],
      ['portal unknown owner', connect('00000000-0000-0000-0000-000000000003', 7, 'x'), '23503', /owner_id/],
    ]);
  });

  it('unknown ids are answered, not errors: false / null / empty, and nothing written', async () => {
    const digest = await databaseDigest(db.sql);
    const [row] = await db.sql`select public.stop_run(null) as a, public.stop_run('00000000-0000-0000-0000-000000000009') as b,
      public.complete_job(null, null) as c, public.complete_job(987654, 1) as d, public.heartbeat_job(987654, 1) as e,
      public.release_job(987654, 1) as f, public.fail_job(987654, 1, 'x') as g, public.complete_fetch_job(987654, 1) as h,
      queue_test.save_fetched_page(987654, 1, '[]', null) as i`;
    expect(row).toEqual({ a: false, b: false, c: false, d: false, e: false, f: null, g: null, h: false, i: null });
    expect(await db.sql`select * from public.claim_portal_token('00000000-0000-0000-0000-000000000009', 'nobody')`).toHaveLength(0);
    expect(await databaseDigest(db.sql)).toBe(digest);
  });
});
