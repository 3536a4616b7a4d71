// What a worker invocation runs with: its settings (budgets, lanes, linger,
// HubSpot) and its dependencies (database, logger, export sink, platform).
import type { Sql } from '../../shared/db.ts';
import type { Platform } from '../../shared/edge-platform.ts';
import type { HubSpotClientOptions, HubSpotContentClient } from '../../shared/hubspot/client.ts';
import type { HubSpotWriteClient } from '../../shared/hubspot/writes.ts';
import type { RateLimitSettings } from '../../shared/hubspot/request-budget.ts';
import type { Logger } from '../../shared/log.ts';
import type { TokenKeyring } from '../../shared/token-crypto.ts';
import type { ExportSink } from './export-sink.ts';

/** Makes a HubSpot client; the worker passes the token, budget hook and deadline. */
export type HubSpotClientFactory = (options: HubSpotClientOptions) => HubSpotContentClient;
/** Makes a HubSpot write client (a publish's batches), with the same options. */
export type HubSpotWriteClientFactory = (options: HubSpotClientOptions) => HubSpotWriteClient;

export interface WorkerSettings {
  /** Wall-clock budget of one invocation in ms, from the request's start. */
  budgetMs: number;
  /** Lanes an invocation starts with: jobs processed at once inside it, at the least. */
  lanes: number;
  /**
   * Lanes an invocation may grow to while every lane is busy and more work is
   * due (default: `lanes`, no growth). Fetch jobs mostly wait on HubSpot's
   * answers, so lanes are cheap in CPU and memory; the isolate's CPU budget
   * still bounds what an invocation does.
   */
  maxLanes?: number;
  /**
   * Schedule probes a lane holds at once (default 1): asked of HubSpot
   * together and reported, with the next ones claimed, in one call
   * (decision 0065), so a quiet cycle costs Postgres a fraction of a call.
   */
  probesPerLane?: number;
  /** Never start a job with less wall-clock time than this left. */
  minStartMs: number;
  /**
   * A lane that finds the queue empty waits for work (one cheap check every
   * LINGER_POLL_MS, less often while the checks find nothing, shared by the
   * idle lanes of every invocation on the same pool) while another lane of
   * its invocation is busy, and for this long after the invocation's last
   * job ended, before it stops: work that arrives
   * meanwhile starts at once, without a wake-up request or a new isolate.
   * 0 (the default here; the function's own default is WORKER_LINGER_MS):
   * stop at once.
   */
  lingerMs?: number;
  /**
   * CPU budget in ms of the isolate's accumulated CPU (hosted: beforeunload at
   * 1.8 s, killed at 2 s). Undefined: no CPU budget (a long-lived Node process).
   */
  cpuBudgetMs?: number;
  /** The isolate's wall-clock limit in ms (hosted: 150 s free, 400 s paid); counted from Platform.isolateStartedAt. */
  isolateWallClockMs?: number;
  /** Wall clock kept in hand at the end of the isolate's life, for releasing and answering. */
  wallReserveMs?: number;
  hubspotBasePath?: string;
  rateLimit: RateLimitSettings;
  hubspotRequestTimeoutMs?: number;
  /** OAuth access tokens are refreshed this long before expiry (default 300 s, at most a quarter of their lifetime). */
  tokenRefreshMarginSeconds?: number;
}

export interface WorkerRuntime {
  sql: Sql;
  log: Logger;
  exportSink: ExportSink;
  settings: WorkerSettings;
  now?: () => number;
  /** Builds HubSpot clients (default: the official client over HTTPS). */
  hubspot?: HubSpotClientFactory;
  /** Builds HubSpot write clients (default: shared/hubspot/writes.ts over HTTPS). */
  hubspotWrites?: HubSpotWriteClientFactory;
  /** The edge runtime's lifecycle: shutdown signal, isolate start, CPU clock. */
  platform?: Platform;
  /** Keys that open the sealed HubSpot tokens (HUBSPOT_TOKEN_KEYS); without them only legacy plaintext tokens work. */
  tokenKeys?: TokenKeyring | null;
  /** The HubSpot OAuth app, to refresh OAuth portals' access tokens. */
  oauthApp?: { clientId: string; clientSecret: string } | null;
  /**
   * Every lane (at maxLanes) is busy and more work is due: start another
   * invocation if the cap allows. True when one was asked for. Unset: never.
   */
  moreWork?: () => boolean;
}
