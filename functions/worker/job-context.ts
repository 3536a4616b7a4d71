// What a job processor gets: the claimed job, the database, a deadline, and a
// signal that fires when the lease is lost (heartbeat returned false).
import type { Sql } from '../../shared/db.ts';
import type { Logger } from '../../shared/log.ts';
import type { ClaimedJob } from '../../shared/queue.ts';
import type { HubSpotContentClient } from '../../shared/hubspot/client.ts';
import type { ExportSink } from './export-sink.ts';

export interface JobContext {
  sql: Sql;
  job: ClaimedJob;
  log: Logger;
  /** Aborted when the lease is lost or the run was stopped: stop at once, write nothing more. */
  signal: AbortSignal;
  /** Milliseconds left before the invocation must have checkpointed and let go. */
  timeLeft(): number;
  /** A HubSpot client for this job's portal (token from the database, shared request budget). */
  hubspotForPortal(portalId: string): Promise<HubSpotContentClient>;
  exportSink: ExportSink;
  now(): number;
}

/** How a job's processing ended, as the invocation reports it. */
export type JobOutcome =
  | { kind: 'completed' }
  | { kind: 'released'; reason: string }
  | { kind: 'lost'; reason: string };

/** A failure that retrying cannot fix (bad credentials, unknown kind): fail the job now. */
export class PermanentJobError extends Error {
  override name = 'PermanentJobError';
}
