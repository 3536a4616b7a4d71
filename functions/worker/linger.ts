// Lingering: a lane that finds the queue empty waits for work (while a sibling
// lane is busy, and for lingerMs after the invocation's last job) instead of
// ending its invocation. One poll per isolate serves every waiting lane.
import type { Sql } from '../../shared/db.ts';
import { claimableJobsExist } from '../../shared/sql/jobs.ts';

/** How often lingering lanes look for claimable work (one query per pool, i.e. per isolate, not per lane). */
export const LINGER_POLL_MS = 20;
/** Each empty look doubles the pause, up to this; work found, a lane gone idle after a job or a wake-up request resets it. */
export const LINGER_POLL_MAX_MS = 640;

/**
 * Idle lanes waiting for work, of every invocation on one database pool (one
 * isolate). One poll loop serves them all: every LINGER_POLL_MS it asks
 * `claimable_jobs_exist`, and when there is work it wakes the longest waiting
 * lane and waits for that lane's claim; a claim that got a job is followed by
 * another check at once, for the next lane. So a new run's jobs are taken one
 * claim after another, never by every idle lane at once, and the isolate asks
 * once per interval however many of its invocations linger. While the looks
 * find nothing and nothing happens (a sibling busy with a long job), the
 * interval doubles up to LINGER_POLL_MAX_MS: each look is a query.
 */
export class IdleLanes {
  private readonly waiting: { over: () => boolean; resolve: (woken: boolean) => void }[] = [];
  private polling = false;
  private claimDone: ((gotJob: boolean) => void) | null = null;
  private cutSleep: (() => void) | null = null;
  private pauseMs = LINGER_POLL_MS;

  constructor(
    private readonly check: () => Promise<boolean>,
    private readonly sleep: (ms: number) => Promise<void>,
  ) {}

  /**
   * Waits for claimable work: true when this lane should claim now (and must
   * then report what its claim found with `claimed`), false once `over` says
   * its invocation may linger no longer (checked at every poll). `soon`: more
   * may come at once (the lane's last work was a job, whose run may add more);
   * a lane that ran out of due schedule probes leaves the pause as it is (decision 0063).
   */
  wait(over: () => boolean, soon = true): Promise<boolean> {
    if (over()) return Promise.resolve(false);
    if (soon) this.pauseMs = LINGER_POLL_MS;
    const woken = new Promise<boolean>((resolve) => this.waiting.push({ over, resolve }));
    if (!this.polling) void this.poll();
    return woken;
  }

  /** Work may have just arrived (a wake-up request reached the isolate): check now instead of at the next poll. */
  nudge(): void {
    this.pauseMs = LINGER_POLL_MS;
    this.cutSleep?.();
  }

  /** What the claim of a woken lane found (called whatever happened after the wake). */
  claimed(gotJob: boolean): void {
    const done = this.claimDone;
    this.claimDone = null;
    done?.(gotJob);
  }

  /** Lets go (false) of every lane whose invocation stopped lingering, or of all of them. */
  private release(all = false): void {
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      const w = this.waiting[i]!;
      if (all || w.over()) {
        this.waiting.splice(i, 1);
        w.resolve(false);
      }
    }
  }

  private async poll(): Promise<void> {
    this.polling = true;
    let again = false;
    try {
      for (;;) {
        if (!again) {
          await Promise.race([this.sleep(this.pauseMs), new Promise<void>((resolve) => (this.cutSleep = resolve))]);
          this.cutSleep = null;
        }
        again = false;
        this.release();
        if (this.waiting.length === 0) break;
        // A failing check ends the lingering: the lanes stop as they would on an empty queue.
        const found = await this.check().catch(() => null);
        if (found === null) {
          this.release(true);
          break;
        }
        this.release();
        this.pauseMs = found ? LINGER_POLL_MS : Math.min(this.pauseMs * 2, LINGER_POLL_MAX_MS);
        if (!found || this.waiting.length === 0) continue;
        const claim = new Promise<boolean>((resolve) => (this.claimDone = resolve));
        this.waiting.shift()!.resolve(true);
        again = await claim;
      }
    } finally {
      this.polling = false;
    }
  }
}

const idleLanesByPool = new WeakMap<Sql, IdleLanes>();

/** Tells the isolate's lingering lanes (if any) to look for work now: a wake-up request says there is some. */
export function nudgeIdleLanes(sql: Sql): void {
  idleLanesByPool.get(sql)?.nudge();
}

/** The idle lanes of the invocations sharing this pool (one poll loop per isolate). */
export function idleLanesOf(sql: Sql): IdleLanes {
  let idle = idleLanesByPool.get(sql);
  if (!idle) {
    idle = new IdleLanes(() => claimableJobsExist(sql), (ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    idleLanesByPool.set(sql, idle);
  }
  return idle;
}
