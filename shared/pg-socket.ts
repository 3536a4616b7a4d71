// A socket for postgres.js that never pipelines, so it is safe behind a
// transaction-mode pooler (Supavisor on port 6543, PgBouncer).
//
// postgres.js (with `prepare: false`) runs a query with parameters in two steps
// — Parse/Describe/Flush, then Bind/Execute/Sync once the parameter types are
// known — and writes a query onto a connection that is still busy with a
// parameterless one. A transaction pooler hands the server connection back to
// its pool at the first query's ReadyForQuery; the second query's first step,
// already forwarded, is answered to nobody, and the connection hangs for good
// (porsager/postgres#970; reproduced here with PgBouncer 1.18 and one
// connection per pool: tests/db-pooler.test.ts).
//
// This socket holds everything postgres.js writes after a Sync or Query until
// that message's ReadyForQuery has come back: at most one request is in flight
// on a connection, whatever postgres.js pipelines. Startup (authentication) and
// COPY FROM STDIN data pass straight through. (It also resumes a socket that
// postgres.js left paused after a COPY TO STDOUT: see the write path.) TLS, when the URL asks for it
// (`sslmode=require|verify-ca|verify-full`), is negotiated here too, so the
// gate sees the protocol, not ciphertext.
import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';

type WriteCallback = (err?: Error | null) => void;

interface Segment {
  buf: Buffer;
  /** ReadyForQuery messages the server will send for it (Sync and Query messages in it). */
  expects: number;
  cb?: WriteCallback;
}

const SYNC = 0x53; // 'S' (frontend)
const QUERY = 0x51; // 'Q'
const READY = 0x5a; // 'Z' (backend)
const COPY_IN = 0x47; // 'G'
const COPY_BOTH = 0x57; // 'W'

/** Counts the outgoing messages of a stream that expect a ReadyForQuery, message by message. */
class FrontendFramer {
  private carry: Buffer = Buffer.alloc(0);

  /** Splits `chunk` into segments that each end with a Sync/Query message (the last may not). */
  split(chunk: Buffer): { complete: Segment[]; open: Buffer | null } {
    const data = this.carry.length ? Buffer.concat([this.carry, chunk]) : chunk;
    const complete: Segment[] = [];
    let start = 0;
    let pos = 0;
    let expects = 0;
    while (data.length - pos >= 5) {
      const type = data[pos]!;
      const len = data.readUInt32BE(pos + 1);
      if (data.length - pos < len + 1) break;
      pos += len + 1;
      if (type === SYNC || type === QUERY) {
        expects++;
        complete.push({ buf: data.subarray(start, pos), expects });
        start = pos;
        expects = 0;
      }
    }
    this.carry = Buffer.from(data.subarray(pos));
    return { complete, open: pos > start ? data.subarray(start, pos) : null };
  }
}

/** Watches incoming backend messages for ReadyForQuery and COPY IN, across chunk boundaries. */
class BackendWatcher {
  private header = Buffer.alloc(5);
  private headerLen = 0;
  private bodyLeft = 0;

  constructor(private readonly onMessage: (type: number) => void) {}

  feed(chunk: Buffer): void {
    let pos = 0;
    while (pos < chunk.length) {
      if (this.bodyLeft > 0) {
        const skip = Math.min(this.bodyLeft, chunk.length - pos);
        this.bodyLeft -= skip;
        pos += skip;
        continue;
      }
      const take = Math.min(5 - this.headerLen, chunk.length - pos);
      chunk.copy(this.header, this.headerLen, pos, pos + take);
      this.headerLen += take;
      pos += take;
      if (this.headerLen < 5) break;
      this.headerLen = 0;
      this.bodyLeft = this.header.readUInt32BE(1) - 4;
      this.onMessage(this.header[0]!);
    }
  }
}

/** Makes `socket` (connected, startup not yet sent) hold writes while a request is in flight. */
export function gateSocket<S extends net.Socket>(socket: S): S {
  const realWrite = socket.write.bind(socket) as (buf: Buffer, cb?: WriteCallback) => boolean;
  const framer = new FrontendFramer();
  const held: Segment[] = [];
  let ready = false; // startup done (first ReadyForQuery seen)
  let inFlight = 0; // ReadyForQuery messages still expected
  let copyIn = false;
  let lastWrite = true;
  let peerEnded = false; // the server ended the connection: nothing more is written

  const pump = () => {
    if (peerEnded || socket.destroyed) {
      // Nothing more reaches the server: the held writes fail (postgres.js hears the close itself).
      const err = new Error('This socket has been ended by the other party');
      for (const seg of held.splice(0)) if (seg.cb) queueMicrotask(() => seg.cb!(err));
      return;
    }
    while (held.length > 0 && (inFlight === 0 || copyIn)) {
      const seg = held.shift()!;
      lastWrite = realWrite(seg.buf, seg.cb);
      inFlight += seg.expects;
    }
  };

  const watcher = new BackendWatcher((type) => {
    if (type === READY) {
      if (!ready) ready = true;
      else inFlight = Math.max(0, inFlight - 1);
      copyIn = false;
      pump();
    } else if (type === COPY_IN || type === COPY_BOTH) {
      copyIn = true;
      pump();
    }
  });
  socket.on('data', (chunk: Buffer) => watcher.feed(chunk));

  type Write = (chunk: string | Uint8Array, enc?: unknown, cb?: unknown) => boolean;
  // Node swaps a socket's write for its writeAfterFIN once the server has ended the connection,
  // which would bypass the gate and, with no 'error' listener left, crash the process: the swap
  // is kept aside instead, and a write after the end fails through its callback (and 'error', if heard).
  const gatedWrite: Write = (chunk, enc, cb) => {
    const callback = (typeof enc === 'function' ? enc : cb) as WriteCallback | undefined;
    if (peerEnded || socket.destroyed) {
      const err = Object.assign(new Error('This socket has been ended by the other party'), { code: 'EPIPE' });
      if (callback) queueMicrotask(() => callback(err));
      if (socket.listenerCount('error') > 0) socket.destroy(err);
      else socket.destroy();
      return false;
    }
    const buf = typeof chunk === 'string' ? Buffer.from(chunk, typeof enc === 'string' ? (enc as BufferEncoding) : 'utf8') : Buffer.from(chunk);
    if (!ready) return realWrite(buf, callback); // startup and authentication: no requests yet
    // postgres.js pauses the socket when a COPY TO STDOUT stream's consumer is slow and only resumes it
    // from that stream's read(); when the stream had already ended, the socket stays paused and the
    // next query's answer is never read. A new request means no COPY stream is running: read again.
    if (socket.isPaused()) socket.resume();
    const { complete, open } = framer.split(buf);
    const segments: Segment[] = open ? [...complete, { buf: open, expects: 0 }] : complete;
    if (segments.length === 0) {
      // Only part of a message so far: acknowledge it once the rest is written.
      if (callback) queueMicrotask(() => callback(null));
      return true;
    }
    segments[segments.length - 1]!.cb = callback;
    held.push(...segments);
    pump();
    return held.length === 0 ? lastWrite : true;
  };
  Object.defineProperty(socket, 'write', {
    configurable: true,
    get: () => gatedWrite,
    set: () => {
      peerEnded = true;
    },
  });
  return socket;
}

export interface SocketTarget {
  host: string;
  port: number;
  /** `sslmode` from the URL: TLS for require/verify-ca/verify-full (verified for the verify-* modes). */
  sslmode?: string;
  connectTimeoutMs: number;
}

const TLS_MODES = ['require', 'verify-ca', 'verify-full'];

/**
 * A gated socket to Postgres or a pooler, for postgres.js's `socket` option.
 * Like postgres.js's own socket, it never throws: a failed connection emits
 * 'error' and 'close', and postgres.js reconnects or fails the queries as usual
 * (its connect_timeout covers a connect that hangs).
 */
export function openGatedSocket(target: SocketTarget): net.Socket | Promise<net.Socket> {
  if (!TLS_MODES.includes(target.sslmode ?? 'disable')) {
    // Plain TCP: writes made before the connection is up are sent once it is.
    return gateSocket(net.connect({ host: target.host, port: target.port }));
  }
  return openTls(target).then(gateSocket, (error: Error) => {
    // Report the failure the way a socket does, once postgres.js listens.
    const failed = new net.Socket();
    setImmediate(() => failed.destroy(error));
    return failed;
  });
}

/** TCP, SSLRequest, then TLS on the same connection (what libpq does for sslmode=require and up). */
async function openTls(target: SocketTarget): Promise<tls.TLSSocket> {
  const raw = net.connect({ host: target.host, port: target.port });
  const timer = setTimeout(() => raw.destroy(new Error(`connect timeout after ${target.connectTimeoutMs} ms (${target.host}:${target.port})`)), target.connectTimeoutMs);
  try {
    await once(raw, 'connect');
    // SSLRequest: int32 length 8, int32 80877103; the server answers one byte, 'S' or 'N'.
    const request = Buffer.alloc(8);
    request.writeUInt32BE(8, 0);
    request.writeUInt32BE(80877103, 4);
    raw.write(request);
    const [answer] = (await once(raw, 'data')) as [Buffer];
    if (answer[0] !== 0x53) throw new Error('the server refused TLS, which sslmode requires');
    const mode = target.sslmode;
    const secure = tls.connect({
      socket: raw,
      servername: net.isIP(target.host) ? undefined : target.host,
      rejectUnauthorized: mode !== 'require',
      checkServerIdentity: mode === 'verify-ca' ? () => undefined : tls.checkServerIdentity,
    });
    await once(secure, 'secureConnect');
    return secure;
  } catch (e) {
    raw.destroy();
    throw e;
  } finally {
    clearTimeout(timer);
  }
}
