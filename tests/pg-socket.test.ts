// The gated socket (shared/pg-socket.ts) after the server ends the connection:
// a write must fail through its callback, never as an 'error' nobody listens
// for (postgres.js removes its listeners when a connection closes; a chaos run
// lost a worker process to "This socket has been ended by the other party"),
// and a refused connect rejects the query under Node and Deno alike.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { gateSocket } from '../shared/pg-socket.ts';

describe('gated socket after the server ends the connection', () => {
  let server: net.Server;
  let port: number;
  beforeAll(async () => {
    server = net.createServer((c) => c.end()); // FIN at once, as a Postgres shutting down does
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('fails a later write through its callback, with no listener left and no uncaught error', async () => {
    const uncaught: Error[] = [];
    const onUncaught = (e: Error) => uncaught.push(e);
    process.prependListener('uncaughtException', onUncaught);
    try {
      const socket = gateSocket(net.connect({ host: '127.0.0.1', port }));
      socket.on('error', () => undefined);
      await once(socket, 'end');
      socket.removeAllListeners(); // what postgres.js does on close
      const result = await new Promise<Error | null | undefined>((resolve) =>
        socket.write(Buffer.from([0x51, 0, 0, 0, 4]), (err) => resolve(err)));
      await new Promise((r) => setTimeout(r, 50));
      expect(result).toBeInstanceOf(Error);
      expect(uncaught).toEqual([]);
      expect(socket.destroyed).toBe(true);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
    }
  });
});

describe('gated socket, connection refused', () => {
  const script = path.join(PROJECT_ROOT, 'tests/support/refused-connect.ts');
  const run = (cmd: string, args: string[]) =>
    new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(cmd, args, { cwd: PROJECT_ROOT, env: process.env });
      let out = '';
      child.stdout.on('data', (b: Buffer) => (out += b.toString()));
      child.stderr.on('data', (b: Buffer) => (out += b.toString()));
      child.once('exit', (code) => resolve({ code, out }));
    });

  // A chaos run's edge isolate died of an uncaught ECONNREFUSED while Postgres restarted; the plain
  // refused connect is not the cause (this passes), which is not found yet: this guards the plain case.
  it.each([
    ['Node', 'node', ['--import', 'tsx', script]],
    ['Deno', path.join(PROJECT_ROOT, 'node_modules/.bin/deno'), ['run', '-A', '--config', path.join(PROJECT_ROOT, 'deno.json'), script]],
  ])('under %s a query rejects with ECONNREFUSED, every time, and the runtime lives on', async (_name, cmd, args) => {
    const { code, out } = await run(cmd, args as string[]);
    expect(out.match(/^rejected ECONNREFUSED$/gm)?.length, out).toBe(3);
    expect(code, out).toBe(0);
  }, 60_000);
});
