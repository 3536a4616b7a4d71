// Dev-only Deno launcher: serves a Supabase function entrypoint on
// 127.0.0.1:<PORT> by pointing its Deno.serve call there, then importing it.
// Usage: deno run -A --config deno.json scripts/deno/serve-function.ts <entrypoint> <port>
const [entry, portArg] = Deno.args;
if (!entry || !portArg) {
  console.error('usage: serve-function.ts <entrypoint> <port>');
  Deno.exit(2);
}
const originalServe = Deno.serve;
// deno-lint-ignore no-explicit-any
(Deno as any).serve = (handler: (req: Request) => Response | Promise<Response>) =>
  originalServe({ port: Number(portArg), hostname: '127.0.0.1', onListen: () => console.error(`listening ${portArg}`) }, handler);
await import(new URL(entry, `file://${Deno.cwd()}/`).href);
