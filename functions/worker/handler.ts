// The worker's HTTP handler: checks the worker secret in constant time, takes
// an invocation lease in Postgres (a capped number run at once), runs one
// invocation, and, when the invocation stopped for lack of budget with work
// still claimable, starts the next one itself (a POST to the worker, kept alive
// with EdgeRuntime.waitUntil); an invocation whose every lane is busy with more
// work due starts another one beside it while the cap allows. Cron stays the
// safety net.
import { z } from 'zod';
import { bearerToken, errorResponse, HttpError, json, readJsonBody, secretsEqual } from '../../shared/http.ts';
import { beginInvocation, finishInvocation, invocationLeases } from '../../shared/sql/invocations.ts';
import { nudgeIdleLanes, runWorkerInvocation, type InvocationSummary, type WorkerRuntime } from './invocation.ts';

export interface WorkerHandlerDeps extends WorkerRuntime {
  /** Secrets accepted as `Authorization: Bearer <secret>` (worker secret, service key). */
  acceptedSecrets: readonly string[];
  /** Makes a worker id per invocation. */
  newWorkerId?: () => string;
  /** Where to POST the next invocation (the worker's own URL) and with which secret; unset: no continuation. */
  continuation?: { url: string; secret: string };
  /** fetch used for continuations. */
  fetch?: typeof fetch;
}

const BodySchema = z.strictObject({
  source: z.string().regex(/^[a-z][a-z0-9_-]{0,39}$/, 'lowercase letters, digits, _ or -, at most 40').optional(),
  mode: z.enum(['wait', 'background']).optional(),
});

/** Why an invocation ended that warrants a next one, when work is left. */
const CONTINUE_AFTER = new Set<InvocationSummary['stopReason']>(['time_budget', 'cpu_budget', 'shutdown']);
const MAX_BODY_BYTES = 4096;
/** An invocation asks for another one beside it at most this often (each ask costs a lease count and a POST). */
export const MORE_WORK_INTERVAL_MS = 5_000;

/** Builds the `(Request) => Promise<Response>` worker handler. */
export function createWorkerHandler(deps: WorkerHandlerDeps): (req: Request) => Promise<Response> {
  const newWorkerId = deps.newWorkerId ?? (() => `worker-${crypto.randomUUID()}`);
  const doFetch = deps.fetch ?? fetch;
  const now = deps.now ?? Date.now;

  /** Seconds the invocation lease is held: the invocation's own deadline, plus a margin for answering. */
  const invocationLeaseSeconds = () => {
    const s = deps.settings;
    let ms = s.budgetMs;
    if (deps.platform && s.isolateWallClockMs) ms = Math.min(ms, deps.platform.isolateStartedAt + s.isolateWallClockMs - now());
    return Math.min(3600, Math.max(1, Math.ceil(ms / 1000) + 30));
  };

  /** POSTs a background invocation of the worker (kept alive with waitUntil); `source` says why. */
  const startAnother = (source: 'continuation' | 'more_work', before: () => Promise<boolean> = async () => true) => {
    const c = deps.continuation;
    if (!c || !deps.platform) return false;
    const next = before().then(async (go) => {
      if (!go) return;
      const res = await doFetch(c.url, {
        method: 'POST',
        headers: { Authorization: `Bearer ${c.secret}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ source, mode: 'background' }),
      });
      await res.body?.cancel().catch(() => {});
      deps.log.info(source === 'continuation' ? 'worker_continued' : 'worker_more_work', { status: res.status });
    }).catch((e: unknown) => deps.log.warn(`worker_${source}_failed`, { error: e instanceof Error ? e.message : String(e) }));
    deps.platform.waitUntil(next);
    return true;
  };
  const continueLater = () => void startAnother('continuation');

  /** An invocation's `moreWork`: another invocation beside it, when fewer than the cap run and none was asked for lately. */
  const moreWorkOf = () => {
    let askedAt = -Infinity;
    return () => {
      if (now() - askedAt < MORE_WORK_INTERVAL_MS) return false;
      askedAt = now();
      return startAnother('more_work', async () => {
        const { active, cap } = await invocationLeases(deps.sql);
        return active < cap;
      });
    };
  };

  /** Runs one invocation under its invocation lease; gives it back and continues when budget ran out with work left. */
  const invoke = async (invocationId: string): Promise<InvocationSummary> => {
    let summary: InvocationSummary | undefined;
    try {
      summary = await runWorkerInvocation({ ...deps, moreWork: deps.continuation && deps.platform ? moreWorkOf() : undefined }, newWorkerId());
      return summary;
    } finally {
      const record = summary
        ? { stopReason: summary.stopReason, claimed: summary.claimed, completed: summary.completed, released: summary.released,
            failed: summary.failed + summary.retried, cpuMs: summary.cpuMs }
        : { stopReason: 'database_error' as const, claimed: 0, completed: 0, released: 0, failed: 0 };
      const more = await finishInvocation(deps.sql, invocationId, { ...record, shutdownReason: deps.platform?.shutdownReason() ?? null })
        .catch(() => false);
      // Only an invocation that got work done (jobs, schedule probes) continues: one that could claim nothing
      // (an isolate already out of budget) leaves the rest to the next trigger, never ping-pongs.
      const worked = summary ? summary.claimed + Object.values(summary.probed).reduce((a, n) => a + n, 0) : 0;
      if (more && worked > 0 && CONTINUE_AFTER.has(summary!.stopReason)) continueLater();
    }
  };

  return async (req) => {
    if (req.method === 'OPTIONS') return new Response(null, { status: 204 });
    if (req.method !== 'POST') return errorResponse(405, 'METHOD_NOT_ALLOWED', 'Use POST to run the worker.', undefined, { Allow: 'POST' });
    const given = bearerToken(req) ?? '';
    let allowed = false;
    for (const secret of deps.acceptedSecrets) if (await secretsEqual(given, secret)) allowed = true;
    if (!allowed) {
      await req.body?.cancel().catch(() => {});
      return errorResponse(401, 'UNAUTHENTICATED', 'The worker needs the worker secret (or the service key) as a bearer token.');
    }
    let body: z.infer<typeof BodySchema>;
    try {
      const raw = req.headers.get('content-length') === '0' ? {} : await readJsonBody(req, MAX_BODY_BYTES).catch((e) => {
        if (e instanceof HttpError && e.code === 'INVALID_BODY' && /must be a JSON object/.test(e.message)) return {};
        throw e;
      });
      const parsed = BodySchema.safeParse(raw);
      if (!parsed.success) {
        const fieldErrors = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
        throw new HttpError(400, 'INVALID_BODY', 'The worker takes an optional { "source": string, "mode": "wait" | "background" }.', { fieldErrors });
      }
      body = parsed.data;
    } catch (e) {
      if (e instanceof HttpError) return e.toResponse();
      throw e;
    }

    // Lanes of this isolate lingering for work look now, before this request's own invocation starts.
    nudgeIdleLanes(deps.sql);
    const invocationId = crypto.randomUUID();
    try {
      if (!(await beginInvocation(deps.sql, invocationId, body.source ?? 'request', invocationLeaseSeconds()))) {
        deps.log.info('worker_invocation_skipped', { reason: 'invocation_cap', source: body.source ?? 'request' });
        return json(200, { status: 'skipped', reason: 'INVOCATION_CAP', message: 'As many worker invocations as the cap allows are running; they will take this work.' });
      }
      if (body.mode === 'background' && deps.platform) {
        deps.platform.waitUntil(invoke(invocationId).catch((e: unknown) => {
          deps.log.error('worker_invocation_failed', { error: e instanceof Error ? e.message : String(e) });
        }));
        return json(202, { status: 'accepted', invocationId });
      }
      const summary = await invoke(invocationId);
      return json(200, summary);
    } catch (e) {
      deps.log.error('worker_invocation_failed', { error: e instanceof Error ? e.message : String(e) });
      return errorResponse(500, 'WORKER_FAILED', 'The worker invocation failed; it will be retried by the next invocation.');
    }
  };
}
