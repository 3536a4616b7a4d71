// The claimable rule has one source, private.claimable (0331), and written-out
// copies that must agree with it (decision 0003, "The claimable check, written
// out"): the batch pick, the one-job and batch UPDATEs of claim_jobs, and
// claimable_jobs_exist, each marked "private.claimable(...), written out". Two
// more passes of claim_jobs pre-filter with a part of the rule (the first job of
// an idle portal; the least loaded portal's, by a load read per portal): a job
// they pass must be claimable, their pick being checked again by the UPDATE.
// (The least-loaded pass counts every running job but fetches against a
// non-fetch kind's cap, so it may pass over a claimable probe or publish job,
// which the scan-order pass then claims.) And the waiting reasons a job is shown
// (shared/sql/waiting.ts) write out the fetch/export exclusion once more.
//
// Property (fast-check, real Postgres): on random queue states — each job's
// status, due time, pause hold, job lease and attempts, each kind's portal cap
// bound and request rate, each portal's learned HubSpot limit — every copy's
// verdict on every pending job equals private.claimable's (the batch UPDATE's
// for a job's 1st to 3rd place in the batch). The copies are read from the live
// function bodies (pg_proc) and evaluated as they are written, so changing one
// without the others fails here; and the functions themselves are called on
// some pending jobs, each made the only due one: claimable_jobs_exist says true,
// and claim_jobs with 1 and with 2 wanted claims it, exactly when it is claimable.
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type postgres from 'postgres';
import type { Sql } from '../shared/db.ts';
import { jobWaitingJoin } from '../shared/sql/waiting.ts';
import { useTestDatabase } from './support/database.ts';
import { seedRun } from './support/queue-fixtures.ts';

const db = useTestDatabase();
const NUM_RUNS = Number(process.env.CLAIMABLE_RUNS ?? 40);

// --- Reading a copy out of a function body --------------------------------------

const STOP_WORDS = new Set(['order', 'returning', 'limit', 'for', 'into', 'group', 'loop', 'then']);

/** The index after the string literal or comment starting at i (i itself when none starts there). */
function skipLiteral(src: string, i: number): number {
  if (src[i] === "'") {
    for (let j = i + 1; j < src.length; j++) {
      if (src[j] === "'") {
        if (src[j + 1] === "'") j++;
        else return j + 1;
      }
    }
    throw new Error('unterminated string literal');
  }
  if (src.startsWith('--', i)) {
    const eol = src.indexOf('\n', i);
    return eol < 0 ? src.length : eol;
  }
  return i;
}

/**
 * The boolean expression starting at `from`, comments left out: up to a `;`, a
 * clause keyword (order by, returning, limit...) outside any bracket, or the `)`
 * of a bracket opened before it. CASE ... END counts as a bracket.
 */
function expressionAt(src: string, from: number): string {
  let depth = 0;
  let out = '';
  let i = from;
  while (i < src.length) {
    const skipped = skipLiteral(src, i);
    if (skipped !== i) {
      if (src[i] === "'") out += src.slice(i, skipped);
      i = skipped;
      continue;
    }
    const word = /^[a-z_][a-z0-9_]*/i.exec(src.slice(i, i + 64))?.[0];
    if (word && !/[a-z0-9_.]/i.test(src[i - 1] ?? ' ')) {
      const w = word.toLowerCase();
      if (depth === 0 && STOP_WORDS.has(w)) break;
      if (w === 'case') depth++;
      if (w === 'end') depth--;
      out += word;
      i += word.length;
      continue;
    }
    const c = src[i]!;
    if (c === '(') depth++;
    if (c === ')') {
      if (depth === 0) break;
      depth--;
    }
    if (c === ';' && depth === 0) break;
    out += c;
    i++;
  }
  if (depth !== 0) throw new Error(`unbalanced expression at ${from}`);
  return out.replace(/\s+/g, ' ').trim();
}

/** The text inside the bracket that opens at the end of `marker` (found once, after `after`). */
function bracketAfter(src: string, marker: string, after = 0): string {
  const at = src.indexOf(marker, after);
  if (at < 0 || src.indexOf(marker, at + 1) >= 0) throw new Error(`"${marker}" not found exactly once`);
  return expressionAt(src, at + marker.length);
}

/** Skips whitespace and comments from i. */
function skipBlank(src: string, i: number): number {
  for (;;) {
    while (/\s/.test(src[i] ?? '')) i++;
    const next = skipLiteral(src, i);
    if (next === i || src[i] === "'") return i;
    i = next;
  }
}

interface MarkedCopy {
  /** The job's alias in the copy, and the alias of its place in the batch (batch UPDATE only). */
  alias: string;
  nthAlias: string | null;
  predicate: string;
}

/** Every copy marked "private.claimable(...), written out" in a function body, its predicate read up to its end. */
function markedCopies(src: string): MarkedCopy[] {
  const marker = /--\s*private\.claimable\((\w+)\.portal_id, \1\.kind, \1\.content_type(?:, (\w+)\.nth)?\), written out[^\n]*/g;
  return [...src.matchAll(marker)].map((m) => {
    let i = skipBlank(src, m.index + m[0].length);
    const lead = /^(and|or|where)\b/i.exec(src.slice(i, i + 6));
    if (!lead) throw new Error(`a marked copy that is not a condition: ${src.slice(i, i + 80)}`);
    i = skipBlank(src, i + lead[0].length);
    return { alias: m[1]!, nthAlias: m[2] ?? null, predicate: expressionAt(src, i) };
  });
}

async function functionBody(sql: Sql, signature: string): Promise<string> {
  const [row] = await sql`select prosrc from pg_proc where oid = ${signature}::regprocedure`;
  return row!.prosrc as string;
}

// --- The copies, as queries over the pending jobs --------------------------------

interface Check {
  name: string;
  /** 'equal': the copy's verdict is private.claimable's; 'implies': a job it passes is claimable. */
  relation: 'equal' | 'implies';
  /** Whether it is asked for a job's 1st, 2nd and 3rd place in a batch (else its 1st only). */
  withNth: boolean;
  /** Rows (id, nth, ok) for every pending job (and nth, when the copy has one). */
  query: string;
}

async function copiesOfTheRule(sql: Sql): Promise<Check[]> {
  const claim = await functionBody(sql, 'public.claim_jobs(text, integer, text[])');
  const exists = await functionBody(sql, 'public.claimable_jobs_exist(text[], boolean)');
  const marked = (where: string, copies: MarkedCopy[]) => copies.map((c, n): Check => ({
    name: `${where}, copy ${n + 1} (private.claimable(${c.alias}.…${c.nthAlias ? `, ${c.nthAlias}.nth` : ''}))`,
    relation: 'equal',
    withNth: c.nthAlias !== null,
    query: `select ${c.alias}.id::text as id, ${c.nthAlias ? `${c.nthAlias}.nth` : '1'} as nth, (${c.predicate}) as ok
              from public.jobs ${c.alias}${c.nthAlias ? ` cross join (values (1), (2), (3)) as ${c.nthAlias}(nth)` : ''}
             where ${c.alias}.status = 'pending'`,
  }));
  const claimCopies = markedCopies(claim);
  const existsCopies = markedCopies(exists);
  // The batch pick, the one-job UPDATE, the batch UPDATE (with its nth); claimable_jobs_exist's one.
  expect(claimCopies.map((c) => [c.alias, c.nthAlias])).toEqual([['p', null], ['j', null], ['j', 'p']]);
  expect(existsCopies.map((c) => [c.alias, c.nthAlias])).toEqual([['w', null]]);

  // Pass 1: the first job of a portal with no running job (the CASE before its claim lock).
  const idleAt = claim.indexOf('limit 128) w');
  const idleCase = /\band\s+(case\s+when\b)/i.exec(claim.slice(idleAt));
  if (idleAt < 0 || !idleCase) throw new Error('claim_jobs: the idle-portal pass not found');
  const idle = expressionAt(claim, idleAt + idleCase.index + idleCase[0].length - idleCase[1]!.length);
  // Pass 2: the least loaded portal's job, its portal's load read once (the load CTE and its filter).
  const load = bracketAfter(claim, 'load as (');
  const loadJoin = 'join load l on l.portal_id = w.portal_id';
  const afterJoin = skipBlank(claim, claim.indexOf(loadJoin) + loadJoin.length);
  if (!/^where\b/i.test(claim.slice(afterJoin, afterJoin + 6))) throw new Error('claim_jobs: the least-loaded pass\'s filter not found');
  const loaded = expressionAt(claim, afterJoin + 'where'.length);

  return [
    ...marked('claim_jobs', claimCopies),
    ...marked('claimable_jobs_exist', existsCopies),
    {
      name: 'claim_jobs, the idle-portal pass',
      relation: 'implies',
      withNth: false,
      query: `select j.id::text as id, 1 as nth, (${idle}) as ok from public.jobs j where j.status = 'pending'`,
    },
    {
      name: 'claim_jobs, the least-loaded pass',
      relation: 'implies',
      withNth: false,
      query: `with w as (select p.id, p.portal_id, p.kind, p.content_type from public.jobs p where p.status = 'pending'),
                   load as (${load})
              select w.id::text as id, 1 as nth, (${loaded}) as ok from w join load l on l.portal_id = w.portal_id`,
    },
  ];
}

// --- Random queue states ---------------------------------------------------------

const TYPES = ['site_pages', 'landing_pages', 'blog_posts', 'hubdb_tables'] as const;
const TYPED_KINDS = ['fetch', 'export', 'publish'] as const;
const KINDS = [...TYPED_KINDS, 'probe'] as const;
/** A slot's active job: none, pending (due, later, held by a pause) or running (job lease live, expired, expired on the last attempt). */
const ACTIVE = ['none', 'none', 'none', 'due', 'due', 'later', 'held', 'running', 'running', 'expired', 'expired_last'] as const;
type Active = (typeof ACTIVE)[number];
const SLOTS = TYPED_KINDS.length * TYPES.length + 1; // and the probe's

const slotArb = fc.record({ active: fc.constantFrom(...ACTIVE), finished: fc.constantFrom(null, null, 'completed', 'failed', 'stopped') });
const portalArb = fc.record({
  // The portal's learned limit per 10 s (null: none learned) and the operator's ceiling.
  learned: fc.constantFrom(null, 10, 30, 60, 100, 190, 1000),
  configured: fc.constantFrom(null, null, 20, 50, 190),
  slots: fc.array(slotArb, { minLength: SLOTS, maxLength: SLOTS }),
});
const kindArb = fc.record({ capMax: fc.constantFrom(null, 1, 2, 3, 8), rate: fc.constantFrom(null, 2, 3, 13) });
const stateArb = fc.record({
  kinds: fc.record({ fetch: kindArb, export: kindArb, publish: kindArb, probe: kindArb }),
  portals: fc.tuple(portalArb, portalArb, portalArb),
  // The pending jobs that claimable_jobs_exist and claim_jobs are called on (taken modulo their number).
  picks: fc.array(fc.nat({ max: 60 }), { minLength: 1, maxLength: 4 }),
});
type StateValue = typeof stateArb extends fc.Arbitrary<infer T> ? T : never;

interface Place { portalId: string; userId: string; runId: string; hubspotPortalId: number }
let places: Place[] = [];
let checks: Check[] = [];
const rollback = new Error('rollback');

/** Writes the state in the transaction: job kinds' settings, portals' limits, the jobs. */
async function writeState(tx: postgres.TransactionSql, state: StateValue): Promise<void> {
  await tx`delete from public.jobs`;
  for (const kind of KINDS) {
    const k = state.kinds[kind];
    await tx`update private.job_kinds set portal_cap_max = ${k.capMax}, job_request_rate = ${k.rate} where kind = ${kind}`;
  }
  await tx`delete from private.hubspot_request_budgets where hubspot_portal_id = any (${places.map((p) => p.hubspotPortalId)})`;
  const rows: Record<string, unknown>[] = [];
  let token = 1;
  state.portals.forEach((portal, i) => {
    const place = places[i]!;
    portal.slots.forEach((slot, s) => {
      const kind = s < SLOTS - 1 ? TYPED_KINDS[Math.floor(s / TYPES.length)]! : 'probe';
      const type = kind === 'probe' ? null : TYPES[s % TYPES.length]!;
      const base = { run_id: place.runId, portal_id: place.portalId, owner_id: place.userId, kind, content_type: type, max_attempts: 3 };
      if (slot.finished) rows.push({ ...base, status: slot.finished, attempts: 1, run_after_s: -60, finished: true });
      const a: Active = slot.active;
      if (a === 'due' || a === 'later' || a === 'held') {
        rows.push({ ...base, status: 'pending', attempts: 0, run_after_s: a === 'due' ? -5 : 600, held: a === 'held' });
      } else if (a !== 'none') {
        rows.push({
          ...base, status: 'running', attempts: a === 'expired_last' ? 3 : 1, run_after_s: -60,
          lease_s: a === 'running' ? 300 : -5, worker_id: 'prop', fencing_token: token++,
        });
      }
    });
  });
  for (const [i, portal] of state.portals.entries()) {
    if (portal.learned === null && portal.configured === null) continue;
    await tx`insert into private.hubspot_request_budgets (hubspot_portal_id, max_per_interval, interval_ms, limit_source, configured_max)
             values (${places[i]!.hubspotPortalId}, ${portal.learned}, ${portal.learned === null ? null : 10_000},
                     ${portal.learned === null ? null : 'headers'}, ${portal.configured})`;
  }
  if (rows.length === 0) return;
  await tx`insert into public.jobs (run_id, portal_id, owner_id, kind, content_type, status, attempts, max_attempts,
                                    lease_expires_at, worker_id, fencing_token, run_after, held_run_after, held_waiting_reason, finished_at)
           select x.run_id, x.portal_id, x.owner_id, x.kind, x.content_type, x.status, x.attempts, x.max_attempts,
                  now() + make_interval(secs => x.lease_s), x.worker_id, x.fencing_token,
                  case when x.held then 'infinity' else now() + make_interval(secs => x.run_after_s) end,
                  case when x.held then now() + make_interval(secs => x.run_after_s) end,
                  case when x.held then 'paused' end,
                  case when x.finished then now() end
             from jsonb_to_recordset(${tx.json(rows as never)}::jsonb) as x(
                  run_id uuid, portal_id uuid, owner_id uuid, kind text, content_type text, status text, attempts integer,
                  max_attempts integer, lease_s integer, worker_id text, fencing_token bigint, run_after_s integer,
                  held boolean, finished boolean)`;
}

/** Every disagreement of a copy with private.claimable in the state written. */
async function disagreements(tx: postgres.TransactionSql): Promise<string[]> {
  const reference = new Map((await tx`
      select j.id::text as id, n.nth, j.portal_id, j.kind, j.content_type, private.claimable(j.portal_id, j.kind, j.content_type, n.nth) as ok
        from public.jobs j cross join (values (1), (2), (3)) as n(nth)
       where j.status = 'pending'`).map((r) => [`${r.id}/${r.nth}`, r]));
  const found: string[] = [];
  for (const check of checks) {
    const rows = await tx.unsafe(check.query);
    const seen = new Set<string>();
    for (const row of rows) {
      const key = `${row.id}/${row.nth}`;
      seen.add(key);
      const ref = reference.get(key)!;
      const agrees = check.relation === 'equal' ? row.ok === ref.ok : !row.ok || ref.ok;
      if (!agrees) {
        found.push(`${check.name}: ${row.ok} for job ${row.id} (${ref.kind} ${ref.content_type ?? ''} of portal ${ref.portal_id}, nth ${row.nth}), private.claimable: ${ref.ok}`);
      }
    }
    const expected = [...reference.keys()].filter((k) => check.withNth || k.endsWith('/1'));
    if (seen.size !== expected.length) found.push(`${check.name}: ${seen.size} verdicts for ${expected.length} pending jobs`);
  }
  return found;
}

/**
 * The waiting reasons a job is shown (shared/sql/waiting.ts) write out the rule's
 * fetch/export exclusion: with no cap on any kind, a pending job not held by a
 * pause is shown waiting for a fetch or an export in flight exactly when
 * private.claimable says no.
 */
async function waitingDisagreeing(tx: postgres.TransactionSql): Promise<string[]> {
  const found: string[] = [];
  await tx.savepoint(async (sp) => {
    await sp`update private.job_kinds set portal_cap_max = null`;
    const rows = await sp`select j.id::text as id, j.kind, j.content_type, w.waiting_reason_code as code,
                                 private.claimable(j.portal_id, j.kind, j.content_type) as ok
                            from public.jobs j ${jobWaitingJoin(sp)}
                           where j.status = 'pending' and j.run_after <> 'infinity'`;
    for (const r of rows) {
      const excluded = r.code === 'fetch_in_flight' || r.code === 'export_in_flight';
      if (excluded === r.ok) found.push(`waiting reason ${r.code} for job ${r.id} (${r.kind} ${r.content_type ?? ''}), private.claimable with no caps: ${r.ok}`);
    }
    throw rollback;
  }).catch((e: unknown) => {
    if (e !== rollback) throw e;
  });
  return found;
}

/**
 * Some pending jobs (`picks`, taken modulo their number), each made the only due
 * one (every job lease live): what the functions say of it, against private.claimable.
 */
async function callsDisagreeing(tx: postgres.TransactionSql, picks: number[]): Promise<string[]> {
  const pending = await tx`select j.id::text as id, private.claimable(j.portal_id, j.kind, j.content_type) as ok
                             from public.jobs j where j.status = 'pending' order by j.id`;
  const found: string[] = [];
  const claimed = async (sql: postgres.TransactionSql, wanted: number) =>
    (await sql`select id::text from public.claim_jobs('prop-claim', ${wanted})`).map((r) => r.id).join();
  for (const job of new Set(pending.length ? picks.map((p) => pending[p % pending.length]!) : [])) {
    await tx.savepoint(async (alone) => {
      await alone`update public.jobs set lease_expires_at = now() + interval '1 hour' where status = 'running'`;
      await alone`update public.jobs
                     set run_after = case when id = ${job.id} then now() - interval '1 second' else now() + interval '1 day' end,
                         held_run_after = null, held_waiting_reason = null
                   where status = 'pending'`;
      const [exists] = await alone`select public.claimable_jobs_exist(null, false) as ok`;
      if (exists!.ok !== job.ok) found.push(`claimable_jobs_exist: ${exists!.ok} with job ${job.id} alone, private.claimable: ${job.ok}`);
      await alone.savepoint(async (one) => {
        const got = await claimed(one, 1);
        if ((got === job.id) !== job.ok) found.push(`claim_jobs(1) claimed [${got}] with job ${job.id} alone, private.claimable: ${job.ok}`);
        throw rollback;
      }).catch((e: unknown) => {
        if (e !== rollback) throw e;
      });
      const got = await claimed(alone, 2);
      if ((got === job.id) !== job.ok) found.push(`claim_jobs(2) claimed [${got}] with job ${job.id} alone, private.claimable: ${job.ok}`);
      throw rollback;
    }).catch((e: unknown) => {
      if (e !== rollback) throw e;
    });
  }
  return found;
}

beforeAll(async () => {
  places = [];
  for (let i = 0; i < 3; i++) places.push(await seedRun(db.sql, { types: ['site_pages'] }));
  checks = await copiesOfTheRule(db.sql);
});

describe('the claimable rule', () => {
  it('reads each written-out copy out of the live function bodies', () => {
    expect(checks.map((c) => c.name)).toEqual([
      'claim_jobs, copy 1 (private.claimable(p.…))',
      'claim_jobs, copy 2 (private.claimable(j.…))',
      'claim_jobs, copy 3 (private.claimable(j.…, p.nth))',
      'claimable_jobs_exist, copy 1 (private.claimable(w.…))',
      'claim_jobs, the idle-portal pass',
      'claim_jobs, the least-loaded pass',
    ]);
    // Each read whole: the portal cap and both exclusions (the load pass's fetch exclusion is its exporting list).
    for (const c of checks.slice(0, 4)) {
      expect(c.query).toContain('private.portal_cap(');
      expect(c.query).toMatch(/kind = 'fetch' and \(select 1 from public\.jobs x/);
      expect(c.query).toMatch(/kind = 'export' and \(select 1 from public\.jobs x/);
    }
  });

  it('every copy agrees with private.claimable on random queue states', async () => {
    let pendingSeen = 0;
    let claimableSeen = 0;
    await fc.assert(fc.asyncProperty(stateArb, async (state) => {
      await db.sql.begin(async (tx) => {
        await writeState(tx, state);
        const [n] = await tx`select count(*)::int as pending, count(*) filter (where private.claimable(portal_id, kind, content_type))::int as ok
                               from public.jobs where status = 'pending'`;
        pendingSeen += n!.pending as number;
        claimableSeen += n!.ok as number;
        expect(await disagreements(tx)).toEqual([]);
        expect(await waitingDisagreeing(tx)).toEqual([]);
        expect(await callsDisagreeing(tx, state.picks)).toEqual([]);
        throw rollback;
      }).catch((e: unknown) => {
        if (e !== rollback) throw e;
      });
    }), { numRuns: NUM_RUNS });
    // Not vacuous: both verdicts came up many times.
    expect(claimableSeen).toBeGreaterThan(NUM_RUNS);
    expect(pendingSeen - claimableSeen).toBeGreaterThan(NUM_RUNS);
  }, 120_000);
});
