// The publish holder functions check that a batch's ids are items of the job's
// plan and type (private.check_job_items) on every call: twice a batch. A plan
// is made and worked at once, before autovacuum has analyzed its items, so the
// planner believes a plan's items of one type are a couple of rows: an anti
// join over them (the plan's type's items scanned for every id, 100 × 5,000
// comparisons a batch of a 5,000-item type) looked as cheap as one primary-key
// probe per id. Bench scenario 13 found it (~50 ms a call, growing with the
// batch's place in the plan). auto_explain reports the nested statement's real
// plan to this session.
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { benchIds, seedContent, seedUsersAndPortals } from '../bench/lib/seed.ts';
import { useTestDatabase } from './support/database.ts';

const db = useTestDatabase();

describe('check_job_items', () => {
  it('probes each id by the primary key in a fresh, unanalyzed plan of thousands of items', async () => {
    await seedUsersAndPortals(db.sql, 1, 1);
    await seedContent(db.sql, 1, 'site_pages', 3_000);
    const { portalId, userId } = benchIds(1);
    await db.sql`insert into public.content_edits (portal_id, owner_id, content_type, hubspot_id, base_updated_at, patch)
      select portal_id, owner_id, content_type, hubspot_id, hubspot_updated_at, jsonb_build_object('htmlTitle', 'Edited ' || hubspot_id)
        from public.hubspot_content where portal_id = ${portalId}`;
    const [plan] = await db.sql`select plan_id, run_id from public.create_publish_plan(${portalId}, ${userId}, null, 'live', null)`;
    const [job] = await db.sql`select id from public.jobs where run_id = ${plan!.run_id as string}`;
    const ids = (await db.sql`select id from public.publish_items where plan_id = ${plan!.plan_id as string} order by id`).map((r) => String(r.id));
    expect(ids).toHaveLength(3_000);

    const notices: string[] = [];
    const sql = postgres(db.directUrl, { prepare: false, max: 1, onnotice: (n) => notices.push(String(n.message)) });
    try {
      try {
        await sql`load 'auto_explain'`;
      } catch (e) {
        console.log(`publish-plans: auto_explain is not available on this server (${e instanceof Error ? e.message : String(e)}): the plan is not checked`);
        return;
      }
      await sql`select set_config('auto_explain.log_min_duration', '0', false), set_config('auto_explain.log_nested_statements', 'on', false),
        set_config('auto_explain.log_analyze', 'on', false), set_config('auto_explain.log_level', 'notice', false)`;
      // The last batches of the plan (the old plan's worst case), 7 calls: past the 5 after which a cached plan may turn generic.
      for (let b = 0; b < 7; b++) {
        notices.length = 0;
        const batch = ids.slice(ids.length - (b + 1) * 100, ids.length - b * 100);
        await sql`select private.check_job_items(j, ${plan!.plan_id as string}::uuid, ${batch}::bigint[]) from public.jobs j where j.id = ${job!.id as string}`;
        const check = notices.find((n) => n.includes('unnest(p_item_ids)')) ?? 'no plan of the check';
        expect(check.match(/Scan using (\w+) on publish_items i\b/)?.[1] ?? check).toBe('publish_items_pkey');
        expect(check).not.toMatch(/Rows Removed by Join Filter/);
      }
      // A stray id is still refused, naming it.
      await expect(sql`select private.check_job_items(j, ${plan!.plan_id as string}::uuid, ${[ids[0]!, '999999999']}::bigint[])
        from public.jobs j where j.id = ${job!.id as string}`).rejects.toMatchObject({ code: '22023', message: expect.stringMatching(/item 999999999 is not one of job/) });
    } finally {
      await sql.end({ timeout: 5 });
    }
  }, 60_000);
});
