// One local edge-function isolate: the bootstrap the local edge runtime
// (local/edge-runtime/) starts in every Deno child process. It gives the
// function what Supabase's edge runtime gives a user worker and nothing else:
//
// - `EdgeRuntime.waitUntil(promise)` (returns the promise; the supervisor keeps
//   the isolate alive while any such promise is pending);
// - the `beforeunload` event as hosted dispatches it: a cancelable CustomEvent
//   whose `detail.reason` is "cpu" | "memory" | "wall_clock" | "early_drop" |
//   "termination" (hosted gives user workers all but the last; Deno's own
//   exit-time `beforeunload`, a plain Event, is kept away from the function's
//   listeners); and the "drain" Event when a retired isolate has no request left;
// - only the environment the supervisor passed for the function (the runtime's
//   own variables are deleted before the function is imported), no arguments;
// - its `Deno.serve(...)` (or `export default { fetch }`) bound to 127.0.0.1 on
//   a port of the OS's choosing, reported to the supervisor.
//
// Protocol. Supervisor -> isolate: JSON lines on stdin
//   {"t":"beforeunload","reason":"cpu"|"wall_clock"}
//   {"t":"drain"}  dispatch a plain "drain" Event (retired, no request in flight)
//   {"t":"drop"}   dispatch beforeunload("early_drop"), then end the isolate
// Isolate -> supervisor: lines on stderr starting with "\x1e<nonce> " and JSON
//   {"t":"ready","port":n} | {"t":"pending","n":n} | {"t":"mem","bytes":n}
//   {"t":"beforeunload","reason":r} (being dispatched) | {"t":"boot_error","message":m}
// stdin closing (the supervisor went away) ends the isolate.
//
// Usage (by the supervisor only): EDGE_ISOLATE_BOOT='<json>' deno run -A
//   --config deno.json --v8-flags=--max-old-space-size=<MB> local/deno/serve-function.ts

interface Boot {
  entry: string;
  nonce: string;
  memoryLimitBytes: number;
  memoryBeforeunloadPct: number;
  memorySampleMs: number;
  hide: string[];
}

const BOOT_VAR = 'EDGE_ISOLATE_BOOT';
const boot = JSON.parse(Deno.env.get(BOOT_VAR) ?? 'null') as Boot | null;
if (!boot) {
  console.error('serve-function.ts is started by the local edge runtime (local/edge-runtime/), not by hand');
  Deno.exit(2);
}
for (const name of [BOOT_VAR, ...boot.hide]) Deno.env.delete(name);

const realExit = Deno.exit.bind(Deno);
const encoder = new TextEncoder();

function send(msg: Record<string, unknown>): void {
  const bytes = encoder.encode(`\x1e${boot!.nonce} ${JSON.stringify(msg)}\n`);
  let off = 0;
  while (off < bytes.length) off += Deno.stderr.writeSync(bytes.subarray(off));
}

// --- beforeunload, shaped as hosted (a CustomEvent with detail.reason) ---
let dispatching = false;
globalThis.addEventListener('beforeunload', (e) => {
  // Registered first: stops Deno's own exit-time beforeunload from reaching the function.
  if (!dispatching) e.stopImmediatePropagation();
});
const dispatched = new Set<string>();
function dispatchBeforeUnload(reason: string): void {
  if (dispatched.has(reason)) return;
  dispatched.add(reason);
  send({ t: 'beforeunload', reason });
  dispatching = true;
  try {
    globalThis.dispatchEvent(new CustomEvent('beforeunload', { cancelable: true, detail: { reason } }));
  } finally {
    dispatching = false;
  }
}

// --- EdgeRuntime.waitUntil ---
let pending = 0;
const edgeRuntime = {
  waitUntil<T>(maybePromise: T): T {
    if (maybePromise instanceof Promise) {
      pending++;
      send({ t: 'pending', n: pending });
      const done = () => {
        pending--;
        send({ t: 'pending', n: pending });
      };
      maybePromise.then(done, done);
    }
    return maybePromise;
  },
};
Object.defineProperty(globalThis, 'EdgeRuntime', { get: () => edgeRuntime, configurable: true });

// --- memory: used heap + external, as hosted's memory check counts it ---
let memWarned = false;
const memTimer = setInterval(() => {
  const m = Deno.memoryUsage();
  const bytes = m.heapUsed + m.external;
  if (!memWarned && boot.memoryLimitBytes > 0 && bytes >= (boot.memoryLimitBytes * boot.memoryBeforeunloadPct) / 100) {
    memWarned = true;
    dispatchBeforeUnload('memory');
  }
  send({ t: 'mem', bytes });
}, boot.memorySampleMs);
Deno.unrefTimer(memTimer);

// --- control lines from the supervisor ---
let drained = false;
(async () => {
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of Deno.stdin.readable) {
    buf += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let msg: { t?: string; reason?: string };
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      if (msg.t === 'beforeunload' && typeof msg.reason === 'string') dispatchBeforeUnload(msg.reason);
      else if (msg.t === 'drain') {
        if (!drained) {
          drained = true;
          globalThis.dispatchEvent(new Event('drain'));
        }
      } else if (msg.t === 'drop') {
        dispatchBeforeUnload('early_drop');
        setTimeout(() => realExit(0), 0);
      }
    }
  }
  realExit(0); // the supervisor is gone
})();

// --- Deno.serve, pointed at loopback ---
type Handler = (req: Request, info: Deno.ServeHandlerInfo) => Response | Promise<Response>;
let served = false;
const realServe = Deno.serve.bind(Deno);
function serve(handler: Handler, onError?: (error: unknown) => Response | Promise<Response>) {
  if (served) throw new Error('Deno.serve was called twice; an edge function serves one handler');
  served = true;
  return realServe({ hostname: '127.0.0.1', port: 0, onError, onListen: ({ port }) => send({ t: 'ready', port }) }, handler);
}
// deno-lint-ignore no-explicit-any
(Deno as any).serve = (a: unknown, b?: unknown) => {
  // Deno.serve(handler) | Deno.serve(options, handler) | Deno.serve({ handler, ...options })
  // deno-lint-ignore no-explicit-any
  const options = (typeof a === 'function' ? {} : (a ?? {})) as any;
  const handler = (typeof a === 'function' ? a : typeof b === 'function' ? b : options.handler) as Handler | undefined;
  if (!handler) throw new TypeError('Deno.serve: no handler');
  return serve(handler, options.onError);
};

try {
  const mod = await import(new URL(boot.entry, `file://${Deno.cwd()}/`).href);
  if (!served) {
    if (typeof mod?.default?.fetch === 'function') serve((req, info) => mod.default.fetch(req, info));
    else throw new Error('the function neither called Deno.serve nor exported default { fetch }');
  }
} catch (e) {
  const message = e instanceof Error ? (e.stack ?? e.message) : String(e);
  console.error(`boot error: ${message}`);
  send({ t: 'boot_error', message: e instanceof Error ? e.message : String(e) });
  realExit(1);
}
