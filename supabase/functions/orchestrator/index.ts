// Supabase edge function entrypoint: the orchestrator (handler in functions/orchestrator).
import { orchestratorHandlerFromEnv } from '../../../functions/orchestrator/from-env.ts';

declare const EdgeRuntime: { waitUntil(p: Promise<unknown>): void } | undefined;

const handler = orchestratorHandlerFromEnv(Deno.env.toObject(), {
  waitUntil: typeof EdgeRuntime !== 'undefined' ? (p) => EdgeRuntime!.waitUntil(p) : undefined,
});

Deno.serve(handler);
