// Supabase edge function entrypoint: the worker (handler in functions/worker).
import { workerHandlerFromEnv } from '../../../functions/worker/from-env.ts';
import { platformFromGlobals } from '../../../shared/edge-platform.ts';

Deno.serve(workerHandlerFromEnv(Deno.env.toObject(), platformFromGlobals()));
