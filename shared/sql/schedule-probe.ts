// Schedule probes (supabase/schemas/0441-0444; docs/decisions/0058): a worker
// lane's claim of a due schedule under the schedule-probe lease (the portal's
// token and a first grant with it), its report of HubSpot's answers, and both
// in one call. The answers are read as a probe job's report reads them
// (./fetch.ts).
import type { Sql } from '../db.ts';
import type { RateLimitHeaders } from '../rate-limit-headers.ts';
import type { BudgetArguments } from './budget.ts';
import type { FirstTokenClaim, TokenClaim } from './credentials.ts';
import { reportedAnswers, withTablesSummary, type ProbeAnswer } from './fetch.ts';

/** A schedule probe a worker lane holds (public.claim_schedule_probe; docs/decisions/0058). */
export interface ScheduleProbe {
  portalId: string;
  /** The fencing token of its schedule-probe lease, which its report must carry. */
  fencingToken: string;
  /** What to ask HubSpot: {types: {type: question}} (private.probe_checkpoint); the report brings it back. */
  checkpoint: unknown;
  /** Claimed with a token holder: the portal's token as claim_portal_token answered the holder, when (this clock) it was asked. */
  token: FirstTokenClaim | null;
  /** Requests already granted from the portal's HubSpot budget for the first round of questions. */
  granted: number;
}

/** What a claim with a token holder also asks for: the portal's token and a grant of the first round's requests. */
export interface ScheduleProbeClaimArgs {
  holder: string;
  refreshLeaseSeconds: number;
  minValidSeconds: number;
  budget: BudgetArguments;
}

/** Claims the schedule probe due longest, or null when none is due; with `args`, its token and first grant too. */
export async function claimScheduleProbe(sql: Sql, args?: ScheduleProbeClaimArgs): Promise<ScheduleProbe | null> {
  const askedAt = Date.now();
  const [row] = args
    ? await sql`select portal_id, fencing_token::text as fencing_token, checkpoint, token, granted from public.claim_schedule_probe(
        ${args.holder}, ${args.refreshLeaseSeconds}, ${args.minValidSeconds}, ${args.budget.maxRequests}, ${args.budget.windowMs},
        ${args.budget.ceiling}, ${args.budget.dailyReservePercent})`
    : await sql`select portal_id, fencing_token::text as fencing_token, checkpoint, token, granted from public.claim_schedule_probe()`;
  return claimedProbe(row, args, askedAt);
}

/** A claim's row as a ScheduleProbe (null: none was due). */
function claimedProbe(row: Record<string, unknown> | undefined, args: ScheduleProbeClaimArgs | undefined, askedAt: number): ScheduleProbe | null {
  if (!row || row.portal_id === null) return null;
  const t = row.token as Record<string, unknown> | null;
  // As claim_portal_token's row reads (bigints as text).
  const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
  const claim = t && ({ ...t, hubspot_portal_id: String(t.hubspot_portal_id), token_version: String(t.token_version),
    refresh_in_ms: text(t.refresh_in_ms), expires_in_ms: text(t.expires_in_ms) } as TokenClaim);
  return {
    portalId: row.portal_id as string, fencingToken: row.fencing_token as string, checkpoint: row.checkpoint,
    token: args && claim ? { holder: args.holder, claim, askedAt } : null, granted: Number(row.granted ?? 0),
  };
}

/** How a schedule probe's report ended: no run, a run fetching the changes, a run taking a failed probe over. */
export type ScheduleProbeOutcome = 'quiet' | 'changed' | 'handed_over';

/** The last HubSpot answer's rate headers as the report takes them (times as ISO text). */
function headersJson(rateHeaders: RateLimitHeaders | null) {
  return rateHeaders && { ...rateHeaders, sentAt: new Date(rateHeaders.sentAt).toISOString(), answeredAt: new Date(rateHeaders.answeredAt).toISOString() };
}

/** The rate headers as the report's jsonb argument. */
function reportedHeaders(sql: Sql, rateHeaders: RateLimitHeaders | null) {
  return rateHeaders && sql.json(headersJson(rateHeaders) as never);
}

/**
 * Reports a schedule probe: HubSpot's answers (as completeProbeJob's), or null
 * when the probe failed and a run should take the cycle over
 * (public.report_schedule_probe). Null when fenced off.
 */
export async function reportScheduleProbe(
  sql: Sql,
  probe: ScheduleProbe,
  answers: Record<string, ProbeAnswer> | null,
  tablesPages: readonly string[] | null = null,
  /** The last HubSpot answer's rate headers, recorded with the report (as recordHubSpotRateHeaders would). */
  rateHeaders: RateLimitHeaders | null = null,
): Promise<ScheduleProbeOutcome | null> {
  const [row] = await sql`select public.report_schedule_probe(${probe.portalId}, ${probe.fencingToken}::bigint,
    ${sql.json(probe.checkpoint as never)}, ${reportedAnswers(sql, answers, tablesPages)}, ${tablesPages as string[] | null}::text[],
    ${reportedHeaders(sql, rateHeaders)}) as outcome`;
  return (row?.outcome as ScheduleProbeOutcome | null) ?? null;
}

/** A schedule probe's report as reportScheduleProbe takes it. */
export interface ScheduleProbeReport {
  probe: ScheduleProbe;
  answers: Record<string, ProbeAnswer> | null;
  tablesPages: readonly string[] | null;
  rateHeaders: RateLimitHeaders | null;
}

/**
 * Reports a lane's probes as reportScheduleProbe does, in order, and claims up
 * to `claims` next ones as claimScheduleProbe does with `next`, in one call
 * (public.report_and_claim_schedule_probes, decisions 0061, 0065): outcomes[n]
 * is reports[n]'s (null: fenced off); with claims, jobsWaiting: whether
 * claim_jobs would find a job now (decision 0063). No reports: a lane's first claim.
 */
export async function reportAndClaimScheduleProbes(
  sql: Sql,
  reports: readonly ScheduleProbeReport[],
  claims: number,
  next: ScheduleProbeClaimArgs | null,
): Promise<{ outcomes: (ScheduleProbeOutcome | null)[]; next: ScheduleProbe[]; jobsWaiting: boolean }> {
  const askedAt = Date.now();
  const json = reports.map((r) => ({
    portal_id: r.probe.portalId, fencing_token: r.probe.fencingToken, checkpoint: r.probe.checkpoint,
    answers: r.answers && withTablesSummary(r.answers, r.tablesPages), tables_pages: r.tablesPages,
    rate_headers: headersJson(r.rateHeaders),
  }));
  // Without `next` nothing is claimed, and the claim's arguments are never read.
  const rows = await sql`select ordinality, outcome, portal_id, fencing_token::text as fencing_token, checkpoint, token, granted, jobs_waiting
    from public.report_and_claim_schedule_probes(${sql.json(json as never)}, ${next ? claims : 0}, ${next?.holder ?? null},
      ${next?.refreshLeaseSeconds ?? null}, ${next?.minValidSeconds ?? null}, ${next?.budget.maxRequests ?? null},
      ${next?.budget.windowMs ?? null}, ${next?.budget.ceiling ?? null}, ${next?.budget.dailyReservePercent ?? null})
    order by ordinality`;
  return {
    outcomes: reports.map((_, n) => (rows[n]?.outcome as ScheduleProbeOutcome | null) ?? null),
    next: rows.map((row) => claimedProbe(row, next ?? undefined, askedAt)).filter((p): p is ScheduleProbe => p !== null),
    jobsWaiting: rows[0]?.jobs_waiting === true,
  };
}
