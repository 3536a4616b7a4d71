// Runs a Supabase function entrypoint under plain Deno on 127.0.0.1:<port>
// (tests only): `deno run -A --config deno.json tests/support/deno-serve.ts <entry> <port>`.
// The entrypoint's own Deno.serve(handler) call is pointed at loopback.
// Typed here for the Node typecheck (tsc has no Deno types); Deno runs this file as is.
declare const Deno: { args: string[]; cwd(): string; serve: (...args: unknown[]) => unknown };
const [entry, port] = Deno.args;
if (!entry || !port) throw new Error('usage: deno-serve.ts <entry> <port>');
type Handler = (req: Request) => Response | Promise<Response>;
const realServe = Deno.serve.bind(Deno);
Deno.serve = (...args: unknown[]) => {
  const handler = (args.find((a) => typeof a === 'function') ?? (args[0] as { handler?: Handler })?.handler) as Handler;
  return realServe({ hostname: '127.0.0.1', port: Number(port), onListen: () => console.log(`listening ${port}`) }, handler);
};
await import(new URL(entry, `file://${Deno.cwd()}/`).href);
