// The stop reasons have one list: web/stop-reasons.js, the page's words keyed
// by reason. The worker's StopReason is its keys (shared/stop-reason.ts; the
// compiler holds every reason the worker sets to them), and the database's
// CHECK on stop_reason, in the invocation log and its per-minute counts, must
// list exactly the same: read here from pg_constraint, and proven by
// finish_worker_invocation taking every reason and refusing any other.
import { describe, expect, it } from 'vitest';
import { beginInvocation, finishInvocation } from '../shared/sql/invocations.ts';
import type { StopReason } from '../shared/stop-reason.ts';
import { STOP_REASONS } from '../web/stop-reasons.js';
import { useTestDatabase } from './support/database.ts';

const db = useTestDatabase();
const REASONS = Object.keys(STOP_REASONS).sort() as StopReason[];

/** The values a `col in (...)` CHECK allows, as Postgres stores it: `CHECK ((col = ANY (ARRAY['a'::text, ...])))`. */
function checkedValues(definition: string): string[] {
  const list = /= ANY \(ARRAY\[(.*)\]\)/.exec(definition)?.[1];
  if (list === undefined) throw new Error(`not an IN-list CHECK: ${definition}`);
  return [...list.matchAll(/'((?:[^']|'')*)'::text/g)].map((m) => m[1]!.replaceAll("''", "'")).sort();
}

describe('stop reasons: one list', () => {
  it('reads an IN-list CHECK as Postgres prints it', () => {
    expect(checkedValues("CHECK ((stop_reason = ANY (ARRAY['time_budget'::text, 'queue_empty'::text, 'it''s'::text])))"))
      .toEqual(["it's", 'queue_empty', 'time_budget']);
    expect(() => checkedValues('CHECK ((claimed >= 0))')).toThrow(/not an IN-list/);
  });

  it('every reason has words for the page', () => {
    expect(REASONS.length).toBeGreaterThan(0);
    for (const r of REASONS) expect(STOP_REASONS[r]).toMatch(/\S/);
  });

  it("the database's CHECK lists exactly the page's reasons, in the log and in its per-minute counts", async () => {
    const rows = await db.sql<{ table: string; def: string }[]>`
      select c.conrelid::regclass::text as table, pg_get_constraintdef(c.oid) as def
        from pg_constraint c
       where c.conname = 'stop_reason_is_known' and c.contype = 'c'
       order by 1`;
    expect(rows.map((r) => r.table)).toEqual(['private.worker_invocation_log', 'private.worker_invocation_minutes']);
    for (const r of rows) expect(checkedValues(r.def), r.table).toEqual(REASONS);
  });

  it('finish_worker_invocation logs every reason and refuses any other (22023, the invocation lease kept)', async () => {
    for (const stopReason of REASONS) {
      const id = crypto.randomUUID();
      expect(await beginInvocation(db.sql, id, 'test', 60)).toBe(true);
      await finishInvocation(db.sql, id, { stopReason, claimed: 0, completed: 0, released: 0, failed: 0 });
      const [row] = await db.sql`select stop_reason from private.worker_invocation_log where id = ${id}`;
      expect(row?.stop_reason).toBe(stopReason);
    }
    const id = crypto.randomUUID();
    expect(await beginInvocation(db.sql, id, 'test', 60)).toBe(true);
    const refused = finishInvocation(db.sql, id, { stopReason: 'out_of_coffee' as StopReason, claimed: 0, completed: 0, released: 0, failed: 0 });
    await expect(refused).rejects.toMatchObject({ code: '22023', message: expect.stringMatching(/"out_of_coffee" is not a stop reason/) });
    const negative = finishInvocation(db.sql, id, { stopReason: 'queue_empty', claimed: -1, completed: 0, released: 0, failed: 0 });
    await expect(negative).rejects.toMatchObject({ code: '22023', message: expect.stringMatching(/must not be negative/) });
    expect(await db.sql`select 1 from private.worker_invocations where id = ${id}`).toHaveLength(1);
    expect(await db.sql`select 1 from private.worker_invocation_log where id = ${id}`).toHaveLength(0);
    await finishInvocation(db.sql, id, { stopReason: 'queue_empty', claimed: 0, completed: 0, released: 0, failed: 0 });
  });
});
