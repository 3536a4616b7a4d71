// A TCP proxy in front of the HubSpot simulator that can go down and come back
// on the same port: while down nothing listens there, so every connection is
// refused (ECONNREFUSED), as when HubSpot's host is unreachable, and the
// connections open when it went down are cut. The functions are given its URL
// as HUBSPOT_BASE_URL; the simulator behind it keeps its state.
import net from 'node:net';

export interface OutageProxy {
  /** http://127.0.0.1:<port>, the same whether up or down. */
  url: string;
  /** Where connections go while up (settable after the proxy starts: a simulator started later). */
  target: string | null;
  /** Refuses every connection from now on and cuts the open ones. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  isDown(): boolean;
  close(): Promise<void>;
}

export async function startOutageProxy(target: string | null = null): Promise<OutageProxy> {
  const sockets = new Set<net.Socket>();
  let server: net.Server | null = null;
  let port = 0;
  const proxy: OutageProxy = {
    url: '',
    target,
    async down() {
      if (!server) return;
      const s = server;
      server = null;
      const closed = new Promise<void>((resolve) => s.close(() => resolve()));
      for (const c of sockets) c.destroy();
      sockets.clear();
      await closed;
    },
    async up() {
      if (server) return;
      server = net.createServer((client) => {
        const to = new URL(proxy.target ?? 'http://127.0.0.1:1');
        const upstream = net.connect(Number(to.port), to.hostname);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => {
            client.destroy();
            upstream.destroy();
          });
        }
        client.pipe(upstream).pipe(client);
      });
      const s = server;
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject);
        s.listen(port, '127.0.0.1', () => resolve());
      });
      port = (s.address() as net.AddressInfo).port;
      proxy.url = `http://127.0.0.1:${port}`;
    },
    isDown: () => server === null,
    async close() {
      await proxy.down();
    },
  };
  await proxy.up();
  return proxy;
}
