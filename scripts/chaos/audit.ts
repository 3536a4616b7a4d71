// Chaos-only instrumentation of the queue database: an AFTER UPDATE trigger on
// public.jobs records every change of status, fencing token or checkpoint in
// chaos.job_transitions (it never touches the job row). From it the chaos run
// counts reclaims, retries and releases exactly, and checks that no job's
// checkpoint ever moved backwards (what a zombie's stale write would do).
import type { Sql } from '../../shared/db.ts';
import type { Violation } from './checks.ts';

export const AUDIT_SQL = `
create schema if not exists chaos;
create table if not exists chaos.job_transitions (
  id bigserial primary key,
  at timestamptz not null default clock_timestamp(),
  job_id bigint not null,
  content_type text not null,
  old_status text, new_status text,
  old_token bigint, new_token bigint,
  old_attempts integer, new_attempts integer,
  old_lease_expired boolean,
  old_checkpoint jsonb, new_checkpoint jsonb,
  new_worker text,
  new_error text
);
create or replace function chaos.audit_job() returns trigger language plpgsql as $$
begin
  if old.status is distinct from new.status or old.fencing_token is distinct from new.fencing_token
     or old.checkpoint is distinct from new.checkpoint then
    insert into chaos.job_transitions (job_id, content_type, old_status, new_status, old_token, new_token, old_attempts, new_attempts,
                                       old_lease_expired, old_checkpoint, new_checkpoint, new_worker, new_error)
    values (new.id, new.content_type, old.status, new.status, old.fencing_token, new.fencing_token, old.attempts, new.attempts,
            old.lease_expires_at <= now(), old.checkpoint, new.checkpoint, new.worker_id, left(new.last_error, 200));
  end if;
  return null;
end $$;
drop trigger if exists chaos_audit_job on public.jobs;
create trigger chaos_audit_job after update on public.jobs for each row execute function chaos.audit_job();
`;

/** Installs the audit trigger (chaos databases only). */
export async function installAudit(sql: Sql): Promise<void> {
  await sql.unsafe(AUDIT_SQL);
}

export interface AuditFigures {
  claims: number;
  reclaims: number;
  retries: number;
  releases: number;
  leaseExpiredFailures: number;
  failures: number;
  checkpointRegressions: number;
}

/** Counts transitions; a checkpoint regression is a violation. */
export async function analyseAudit(sql: Sql): Promise<{ figures: AuditFigures; violations: Violation[] }> {
  const [f] = await sql`select
      (count(*) filter (where new_status = 'running' and new_token is distinct from old_token))::int as claims,
      (count(*) filter (where old_status = 'running' and new_status = 'running' and new_token is distinct from old_token))::int as reclaims,
      (count(*) filter (where old_status = 'running' and new_status = 'pending' and new_attempts = old_attempts))::int as retries,
      (count(*) filter (where old_status = 'running' and new_status = 'pending' and new_attempts < old_attempts))::int as releases,
      (count(*) filter (where old_status = 'running' and new_status = 'failed' and new_error like 'Job lease expired%'))::int as lease_failures,
      (count(*) filter (where new_status = 'failed' and old_status is distinct from 'failed'))::int as failures
    from chaos.job_transitions`;
  const rows = await sql`select job_id::text, content_type, new_checkpoint from chaos.job_transitions
    where old_checkpoint is distinct from new_checkpoint order by job_id, id`;
  const violations: Violation[] = [];
  let regressions = 0;
  let lastJob = '';
  let last: number[] = [];
  for (const r of rows) {
    const pos = checkpointPosition(r.content_type as string, r.new_checkpoint);
    if (r.job_id !== lastJob) {
      lastJob = r.job_id as string;
      last = pos;
      continue;
    }
    if (compare(pos, last) < 0) {
      regressions++;
      if (regressions <= 5) violations.push({ check: 'checkpoint never moves back', detail: `job ${r.job_id} (${r.content_type}) went from ${JSON.stringify(last)} to ${JSON.stringify(pos)}` });
    }
    last = pos;
  }
  if (regressions > 5) violations.push({ check: 'checkpoint never moves back', detail: `${regressions - 5} more regressions` });
  return {
    figures: {
      claims: f!.claims as number,
      reclaims: f!.reclaims as number,
      retries: f!.retries as number,
      releases: f!.releases as number,
      leaseExpiredFailures: f!.lease_failures as number,
      failures: f!.failures as number,
      checkpointRegressions: regressions,
    },
    violations,
  };
}

/** Simulator cursors are base64url("sim:<id>"); the HubDB rows cursor is JSON {tableId, after}. */
function cursorId(after: string | null | undefined): number {
  if (!after) return 0;
  const m = /^sim:(\d+)$/.exec(Buffer.from(after, 'base64url').toString('utf8'));
  return m ? Number(m[1]) : 0;
}

/** A sortable position for a fetch checkpoint: [finished, table, id]. */
export function checkpointPosition(contentType: string, checkpoint: unknown): number[] {
  const c = (checkpoint ?? {}) as { after?: string | null; finished?: boolean };
  if (c.finished) return [1, 0, 0];
  if (contentType === 'hubdb_rows' && typeof c.after === 'string') {
    try {
      const inner = JSON.parse(c.after) as { tableId?: string; after?: string | null };
      return [0, Number(inner.tableId ?? 0), cursorId(inner.after)];
    } catch {
      return [0, 0, 0];
    }
  }
  return [0, 0, cursorId(c.after)];
}

function compare(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
