// Runs under Node or Deno (tests/pg-socket.test.ts): a query to a port nobody
// listens on must reject (printing its error code), not crash the runtime.
import net from 'node:net';
import { connectDatabase } from '../../shared/db.ts';

const probe = net.createServer();
await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
const port = (probe.address() as net.AddressInfo).port;
await new Promise<void>((resolve) => probe.close(() => resolve())); // free again: connects are refused

const sql = connectDatabase(`postgres://postgres:x@127.0.0.1:${port}/postgres`, { max: 1 });
for (let i = 0; i < 3; i++) {
  try {
    await sql`select 1`;
    console.log('connected?');
  } catch (e) {
    console.log(`rejected ${(e as { code?: string }).code ?? (e as Error).message}`);
  }
}
await sql.end({ timeout: 1 });
