// The worker's HTTP handler: checks the worker secret in constant time, then
// runs one invocation and answers with its JSON summary.
import { bearerToken, errorResponse, json, secretsEqual } from '../../shared/http.ts';
import { runWorkerInvocation, type WorkerRuntime } from './invocation.ts';

export interface WorkerHandlerDeps extends WorkerRuntime {
  /** Secrets accepted as `Authorization: Bearer <secret>` (worker secret, service key). */
  acceptedSecrets: readonly string[];
  /** Makes a worker id per invocation. */
  newWorkerId?: () => string;
}

/** Builds the `(Request) => Promise<Response>` worker handler. */
export function createWorkerHandler(deps: WorkerHandlerDeps): (req: Request) => Promise<Response> {
  const newWorkerId = deps.newWorkerId ?? (() => `worker-${crypto.randomUUID()}`);
  return async (req) => {
    if (req.method === 'OPTIONS') return new Response(null, { status: 204 });
    if (req.method !== 'POST') return errorResponse(405, 'METHOD_NOT_ALLOWED', 'Use POST to run the worker.', undefined, { Allow: 'POST' });
    const given = bearerToken(req) ?? req.headers.get('apikey') ?? '';
    let allowed = false;
    for (const secret of deps.acceptedSecrets) if (await secretsEqual(given, secret)) allowed = true;
    await req.body?.cancel().catch(() => {});
    if (!allowed) return errorResponse(401, 'UNAUTHENTICATED', 'The worker needs the worker secret (or the service key) as a bearer token.');
    try {
      const summary = await runWorkerInvocation(deps, newWorkerId());
      return json(200, summary);
    } catch (e) {
      deps.log.error('worker_invocation_failed', { error: e instanceof Error ? e.message : String(e) });
      return errorResponse(500, 'WORKER_FAILED', 'The worker invocation failed; it will be retried by the next invocation.');
    }
  };
}
