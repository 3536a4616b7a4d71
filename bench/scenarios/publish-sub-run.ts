// Scenario 13's smaller sub-run: HubDB rows (over a few tables) and URL
// redirects, published on a portal of their own through the same system as
// the main run (plan, approval, publish run), nothing injected. HubDB rows are
// written as drafts, then each table published and its rows read back; a
// redirect is read and PATCHed one at a time (HubSpot has no batch for them),
// and its window checked in the audit log. Their requests per 100 edits, the
// share applied (the target read back from HubSpot) and the per-item write
// counter.
import type { LocalSystem } from '../../local/system.ts';
import type { ContentType } from '../../shared/content-types.ts';
import type { Sql } from '../../shared/db.ts';
import { approvePublishPlan, createPublishPlan } from '../../shared/sql/publish.ts';
import type { BenchContext } from '../lib/context.ts';
import { addBenchPortal } from '../lib/edge.ts';
import { atLeast, atMost, figure, type Figure } from '../lib/report.ts';
import { countRequests, fetchCopy, fieldsOf, hubspotNow, portalRequests, runToEnd, sameJson, seedEdits, type Json } from './publish-harness.ts';

const S = '13';

export interface SubRun {
  figures: Figure[];
  details: Record<string, unknown>;
  /** 429s the sub-run's portal got. */
  rateLimited: number;
}

export async function hubdbAndRedirects(
  ctx: BenchContext, sql: Sql, sys: LocalSystem, size: { rows: number; tables: number; redirects: number }, runTimeoutMs: number, fetchTimeoutMs: number,
): Promise<SubRun> {
  const portal = await addBenchPortal(sql, sys, {
    hubspotPortalId: 31_300_002, name: 'HubDB and redirects portal',
    sizes: { hubdb_tables: size.tables, hubdb_rows: size.rows, url_redirects: size.redirects }, hubdbTables: size.tables,
  });
  const types: ContentType[] = ['hubdb_rows', 'url_redirects'];
  await fetchCopy(sql, sys, portal, ['hubdb_tables', ...types], fetchTimeoutMs);
  const targets = new Map<ContentType, Map<string, Json>>();
  for (const type of types) targets.set(type, await seedEdits(sql, portal, type, type === 'hubdb_rows' ? size.rows : size.redirects));
  ctx.log(`${S}: sub-run: ${size.rows} HubDB rows over ${size.tables} tables, ${size.redirects} redirects`);

  const t0 = Date.now();
  const plan = await createPublishPlan(sql, { portalId: portal.portalId, userId: portal.userId });
  const planStatus = await runToEnd(sql, sys, plan.runId, runTimeoutMs);
  const planEnd = Date.now();
  const runId = await approvePublishPlan(sql, plan.planId, portal.userId);
  const applyStatus = await runToEnd(sql, sys, runId, runTimeoutMs);
  const t1 = Date.now();
  const log = sys.sim.requestLog();
  const entries = portalRequests(log, portal, t0, t1);
  const items = await sql`select content_type, hubspot_id, outcome from public.publish_items where plan_id = ${plan.planId}`;
  const outcomeOf = new Map(items.map((i) => [`${String(i.content_type)}/${String(i.hubspot_id)}`, String(i.outcome)]));

  const figures: Figure[] = [];
  const details: Record<string, unknown> = { planStatus, applyStatus, seconds: (t1 - t0) / 1000, planSeconds: (planEnd - t0) / 1000 };
  for (const type of types) {
    const label = type === 'hubdb_rows' ? 'publish (HubDB rows): ' : 'publish (redirects): ';
    const wanted = targets.get(type)!;
    const mine = entries.filter((e) => (type === 'hubdb_rows' ? /\/hubdb\//.test(e.path) : /\/url-redirects\/|audit-logs/.test(e.path)));
    const counts = countRequests(mine);
    const now = await hubspotNow(sys.sim.url, portal, type, [...wanted.keys()]);
    const applied = [...wanted].filter(([id, patch]) => {
      const outcome = outcomeOf.get(`${type}/${id}`);
      return (outcome === 'applied' || outcome === 'overwritten') && sameJson(fieldsOf(now.get(id), patch), patch);
    }).length;
    const twice = Object.values(sys.sim.writeCounts(portal.hubspotPortalId, type)).filter((n) => n > 1).length;
    ctx.checks.equal(S, `${label}every edit applied, its target in HubSpot`, applied, wanted.size);
    ctx.checks.equal(S, `${label}no item written twice by HubSpot`, twice, 0);
    figures.push(
      figure(S, `${label}HubSpot requests per 100 edits`, 'count', [(100 * (counts.read + counts.write)) / wanted.size], {
        note: `${wanted.size} edits: ${JSON.stringify(counts.byEndpoint)}`,
      }),
      ...(type === 'url_redirects' ? [figure(S, `${label}window-check requests per 100 edits`, 'count', [(100 * counts.window) / wanted.size])] : []),
      figure(S, `${label}applied ÷ edits`, 'ratio', [applied / wanted.size], { goal: atLeast(1, '1') }),
      figure(S, `${label}items written more than once`, 'count', [twice], { goal: atMost(0, '0') }),
    );
    details[type] = { edits: wanted.size, applied, requests: counts };
  }
  ctx.checks.equal(S, 'sub-run: plan run completed', planStatus, 'completed');
  ctx.checks.equal(S, 'sub-run: publish run completed', applyStatus, 'completed');
  return { figures, details, rateLimited: countRequests(entries).rateLimited };
}
