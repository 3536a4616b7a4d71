// The local stand-in for Supabase Realtime's postgres_changes, served by the
// local gateway at /realtime/v1/websocket. It speaks the Phoenix channels
// protocol the way supabase/realtime does towards @supabase/realtime-js:
// serializer vsn 2.0.0 (JSON arrays [join_ref, ref, topic, event, payload]) and
// 1.0.0 (JSON objects); heartbeats on topic "phoenix"; phx_join with
// config.postgres_changes and access_token, answered by a phx_reply carrying the
// bindings' ids, then a `system` message ("Subscribed to PostgreSQL" or why
// not); `postgres_changes` events {ids, data}; `access_token` to swap the
// token, which (as hosted) subscribes the channel's bindings again with the new
// token's claims after a 1-3 s backoff, "Subscribed to PostgreSQL" once more:
// a channel that joined as anon (subscribed before realtime-js had the user's
// token) then gets the user's rows, a filter refused to anon included; phx_leave. Changes come from the WAL (./changes.ts); each is sent to a
// subscriber only if its filters match and, on a table with RLS, the row is
// visible to the subscriber's own JWT claims (./database.ts), as hosted does.
// Tokens are checked against the project's JWKS and refused with the real
// server's errors (./jwt.ts). Broadcast and presence are not served.
// Rationale: docs/decisions/0040-realtime-stand-in.md.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { JWK } from 'jose';
import postgres from 'postgres';
import { WebSocketServer, type WebSocket } from 'ws';
import { startChangeFeed, type Change, type ChangeFeed } from './changes.ts';
import { checkFilters, evaluateFilters, matchingEntities, tableColumns, typedRecords, visibleRows, type Entity, type FilterCheck, type TableColumn } from './database.ts';
import { paramsToLog, parseSubscriptionParams, type SubscriptionParams } from './filters.ts';
import { checkToken, type Claims, type TokenRefusal } from './jwt.ts';

export interface LocalRealtimeOptions {
  /** A direct connection URL (a session of its own holds the slot: not through a transaction pooler). */
  dbUrl: string;
  /** The project's JWKS: tokens are checked against it. */
  jwks: { keys: JWK[] };
  /** Default supabase_realtime, as hosted. */
  publication?: string;
  /** Slot poll interval while someone listens (hosted: 100 ms). */
  pollMs?: number;
  /** How long after an `access_token` the bindings are subscribed again, picked at random in [min, max] ms (hosted: 1000-3000). */
  resubscribeDelayMs?: readonly [number, number];
  log?: (line: string) => void;
}

export interface RealtimeStats {
  sockets: number;
  channels: number;
  subscriptions: number;
  /** Changes decoded from the WAL while someone listened. */
  changes: number;
  /** postgres_changes messages sent. */
  delivered: number;
  /** Socket connections refused (bad API key). */
  refusedSockets: number;
  /** Joins refused (bad access token, ...). */
  refusedJoins: number;
  /**
   * Queries made to deliver changes (filters, RLS, records, column lookups): a handful per poll, however many
   * changes it decoded (they are checked together).
   */
  deliveryQueries: number;
}

export interface LocalRealtime {
  /** Takes over an HTTP upgrade to /realtime/v1/websocket. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  stats(): RealtimeStats;
  close(): Promise<void>;
}

type Frame = { join_ref: string | null; ref: string | null; topic: string; event: string; payload: unknown };

interface Binding {
  /** The id realtime-js matches events by (the real server: :erlang.phash2 of the params). */
  id: number;
  params: SubscriptionParams;
  entities: Entity[];
}

interface Channel {
  conn: Connection;
  topic: string;
  subTopic: string;
  joinRef: string;
  token: string;
  /** The current token's claims (checked again before it expires). */
  tokenClaims: Claims;
  /** The claims the bindings were subscribed with: changes are checked against these (RLS, column privileges). */
  claims: Claims;
  bindings: Binding[];
  /** Why the join's bindings could not be parsed (said again on every resubscribe), if so. */
  paramsError?: string;
  resubscribeTimer?: NodeJS.Timeout;
  /** The bindings are live (after "Subscribed to PostgreSQL"). */
  active: boolean;
  /** The database's clock when they went live: changes committed before are not this channel's. */
  since: number;
  confirmTimer?: NodeJS.Timeout;
}

interface Connection {
  ws: WebSocket;
  vsn: '1.0.0' | '2.0.0';
  apiKeyToken: string;
  channels: Map<string, Channel>;
}

const CONFIRM_TOKEN_MS = 5 * 60_000;

/** A stable 27-bit id for a binding's params (the real server uses :erlang.phash2, same range). */
function bindingId(params: unknown): number {
  const canon = (v: unknown): string =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? `{${Object.keys(v as object).sort().map((k) => `${JSON.stringify(k)}:${canon((v as Record<string, unknown>)[k])}`).join(',')}}`
      : Array.isArray(v) ? `[${v.map(canon).join(',')}]` : JSON.stringify(v);
  let h = 0x811c9dc5;
  for (const ch of canon(params)) {
    h ^= ch.charCodeAt(0);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h & 0x7ffffff;
}

/** The HTTP answer to a refused socket connection (RealtimeWeb.UserSocket.handle_error). */
const SOCKET_REFUSAL: Record<TokenRefusal['reason'], string> = {
  token_malformed: 'The token provided is not a valid JWT',
  expired_token: 'Token has expired',
  missing_claims: 'Fields `role` and `exp` are required in JWT',
  signature_error: 'Failed to validate JWT signature',
  error_generating_signer: 'Failed to generate JWT signer, check your JWT secret or JWKS configuration',
};

export async function startLocalRealtime(opts: LocalRealtimeOptions): Promise<LocalRealtime> {
  const publication = opts.publication ?? 'supabase_realtime';
  const log = opts.log ?? (() => {});
  const sql = postgres(opts.dbUrl, { max: 3, prepare: false, idle_timeout: 30, onnotice: () => {}, connection: { application_name: 'realtime-stand-in' } });
  const wss = new WebSocketServer({ noServer: true });
  const connections = new Set<Connection>();
  const stats = { changes: 0, delivered: 0, refusedSockets: 0, refusedJoins: 0, deliveryQueries: 0 };
  const channels = () => [...connections].flatMap((c) => [...c.channels.values()]);

  const encode = (conn: Connection, f: Frame) =>
    conn.vsn === '2.0.0' ? JSON.stringify([f.join_ref, f.ref, f.topic, f.event, f.payload]) : JSON.stringify(f);
  const send = (conn: Connection, f: Frame) => {
    if (conn.ws.readyState === conn.ws.OPEN) conn.ws.send(encode(conn, f));
  };
  const reply = (conn: Connection, m: Frame, status: 'ok' | 'error', response: unknown) =>
    send(conn, { join_ref: m.join_ref, ref: m.ref, topic: m.topic, event: 'phx_reply', payload: { status, response } });
  const system = (ch: Channel, extension: 'system' | 'postgres_changes', status: 'ok' | 'error', message: string) =>
    send(ch.conn, { join_ref: ch.joinRef, ref: null, topic: ch.topic, event: 'system', payload: { extension, status, message, channel: ch.subTopic } });

  function closeChannel(ch: Channel, notify: boolean) {
    clearTimeout(ch.confirmTimer);
    clearTimeout(ch.resubscribeTimer);
    if (ch.conn.channels.get(ch.topic) === ch) ch.conn.channels.delete(ch.topic);
    if (notify) send(ch.conn, { join_ref: ch.joinRef, ref: ch.joinRef, topic: ch.topic, event: 'phx_close', payload: {} });
  }
  /** shutdown_response: a system error, then the channel ends. */
  function shutdown(ch: Channel, message: string) {
    system(ch, 'system', 'error', message);
    closeChannel(ch, true);
  }

  function scheduleConfirm(ch: Channel) {
    clearTimeout(ch.confirmTimer);
    const msLeft = ch.tokenClaims.exp * 1000 - Date.now();
    ch.confirmTimer = setTimeout(async () => {
      const check = await checkToken(ch.token, opts.jwks);
      if (!check.ok) return shutdown(ch, check.refusal.message);
      ch.tokenClaims = check.claims;
      scheduleConfirm(ch);
    }, Math.max(0, Math.min(CONFIRM_TOKEN_MS, msLeft)));
    ch.confirmTimer.unref();
  }

  /** Subscribes the channel's bindings with these claims, all or none (hosted: one transaction); on success they are the channel's. */
  async function subscribe(ch: Channel, claims: Claims) {
    if (ch.paramsError) return system(ch, 'postgres_changes', 'error', ch.paramsError);
    const role = claims.role;
    const checked: Entity[][] = [];
    try {
      for (const b of ch.bindings) {
        const entities = await matchingEntities(sql, publication, b.params.schema, b.params.table);
        if (!entities.length) {
          return system(ch, 'postgres_changes', 'error', `Unable to subscribe to changes with given parameters. Please check Realtime is enabled for the given connect parameters: [${paramsToLog(b.params)}]`);
        }
        for (const e of entities) {
          try {
            await checkFilters(sql, await tableColumns(sql, e.oid, role), b.params.filters, b.params.selectedColumns);
          } catch (err) {
            return system(ch, 'postgres_changes', 'error', `Unable to subscribe to changes with given parameters. An exception happened so please check your connect parameters: [${paramsToLog(b.params)}]. Exception: ERROR P0001 (raise_exception) ${err instanceof Error ? err.message : String(err)}`);
          }
        }
        checked.push(entities);
      }
    } catch (err) {
      return system(ch, 'postgres_changes', 'error', String(err instanceof Error ? err.message : err));
    }
    const [{ now }] = (await sql`select clock_timestamp() as now`) as unknown as [{ now: Date }];
    if (ch.conn.channels.get(ch.topic) !== ch) return; // left meanwhile
    ch.bindings.forEach((b, i) => (b.entities = checked[i]!));
    ch.claims = claims;
    // Live bindings stay live (hosted updates their rows' claims); new ones start now.
    if (!ch.active) ch.since = now.getTime();
    ch.active = true;
    feed.poke();
    system(ch, 'postgres_changes', 'ok', 'Subscribed to PostgreSQL');
  }

  async function onJoin(conn: Connection, m: Frame) {
    const payload = (m.payload ?? {}) as Record<string, any>;
    if (m.topic === 'realtime:') return reply(conn, m, 'error', { reason: 'TopicNameRequired: You must provide a topic name' });
    const old = conn.channels.get(m.topic);
    if (old) closeChannel(old, true); // Phoenix: a duplicate join closes the existing channel
    const given = payload.access_token ?? payload.user_token;
    const token = typeof given === 'string' && !given.startsWith('sb_') ? given : conn.apiKeyToken;
    const check = await checkToken(token, opts.jwks);
    if (!check.ok) {
      stats.refusedJoins++;
      return reply(conn, m, 'error', { reason: `${check.refusal.code}: ${check.refusal.message}` });
    }
    const config = payload.config;
    if (config?.private === true) {
      // Private channels are authorized by RLS on realtime.messages, which the local project does not have.
      stats.refusedJoins++;
      return reply(conn, m, 'error', { reason: `Unauthorized: You do not have permissions to read from this Channel topic: ${m.topic.slice('realtime:'.length)}` });
    }
    const raw: Record<string, unknown>[] = Array.isArray(config?.postgres_changes) ? config.postgres_changes.filter((p: unknown) => p && typeof p === 'object') : [];
    const ch: Channel = {
      conn, topic: m.topic, subTopic: m.topic.slice('realtime:'.length), joinRef: m.join_ref ?? m.ref ?? '', token,
      tokenClaims: check.claims, claims: check.claims, bindings: [], active: false, since: Infinity,
    };
    const parsed = raw.map((p) => ({ raw: p, params: parseSubscriptionParams(p) }));
    conn.channels.set(m.topic, ch);
    scheduleConfirm(ch);
    reply(conn, m, 'ok', { postgres_changes: raw.map((p) => ({ ...p, id: bindingId(p) })) });
    if (!raw.length) return;
    const bad = parsed.find((p) => typeof p.params === 'string');
    if (bad) ch.paramsError = bad.params as string;
    else ch.bindings = parsed.map((p) => ({ id: bindingId(p.raw), params: p.params as SubscriptionParams, entities: [] }));
    await subscribe(ch, ch.claims);
  }

  async function onAccessToken(ch: Channel, payload: Record<string, unknown>) {
    const token = payload.access_token;
    if (typeof token !== 'string' || token.startsWith('sb_') || token === ch.token) return;
    const check = await checkToken(token, opts.jwks);
    if (!check.ok) {
      const r = check.refusal;
      return shutdown(ch, r.reason === 'signature_error' || r.reason === 'error_generating_signer' ? `:${r.reason}` : r.message);
    }
    ch.token = token;
    ch.tokenClaims = check.claims;
    scheduleConfirm(ch);
    // The bindings again, with the new claims, after hosted's backoff; a later token restarts it.
    if (!ch.bindings.length && !ch.paramsError) return;
    clearTimeout(ch.resubscribeTimer);
    const [min, max] = opts.resubscribeDelayMs ?? [1000, 3000];
    const claims = check.claims;
    ch.resubscribeTimer = setTimeout(() => {
      if (ch.conn.channels.get(ch.topic) === ch) void subscribe(ch, claims).catch((e) => log(`realtime: ${e instanceof Error ? e.message : String(e)}`));
    }, min + Math.random() * (max - min));
    ch.resubscribeTimer.unref();
  }

  async function onMessage(conn: Connection, m: Frame) {
    if (m.topic === 'phoenix' && m.event === 'heartbeat') return reply(conn, m, 'ok', {});
    if (m.event === 'phx_join') return onJoin(conn, m);
    const ch = conn.channels.get(m.topic);
    if (!ch) return reply(conn, m, 'error', { reason: 'unmatched topic' });
    if (m.event === 'phx_leave') {
      reply(conn, m, 'ok', {});
      return closeChannel(ch, true);
    }
    if (m.event === 'access_token') return onAccessToken(ch, (m.payload ?? {}) as Record<string, unknown>);
    // broadcast, presence and anything else: not served (the real server ignores unknown events too).
  }

  function parseFrame(conn: Connection, text: string): Frame | null {
    try {
      const v = JSON.parse(text);
      if (conn.vsn === '2.0.0' && Array.isArray(v) && v.length === 5) return { join_ref: v[0], ref: v[1], topic: String(v[2]), event: String(v[3]), payload: v[4] };
      if (conn.vsn === '1.0.0' && v && typeof v === 'object') return { join_ref: v.join_ref ?? null, ref: v.ref ?? null, topic: String(v.topic), event: String(v.event), payload: v.payload };
    } catch {
      /* not JSON */
    }
    return null;
  }

  // ---------- changes to subscribers ----------

  /**
   * One poll's changes to their subscribers, in commit order. What hosted Realtime's apply_rls does per WAL
   * record (the binding's filters, then the row selected as the subscriber under RLS, then the row cast to
   * its types) is done here for the whole batch at once: one query for every filter, one per table, role
   * and claims for RLS, one per table for the records, whatever the number of changes. Checked one change
   * at a time (some 7 round trips each), a fetch's stream of job updates fell seconds behind the commits.
   */
  async function deliver(changes: Change[]) {
    stats.changes += changes.length;
    const live = channels().filter((c) => c.active);
    const columnsCache = new Map<string, Promise<TableColumn[]>>();
    const columnsOf = (oid: number, role: string) => {
      const k = `${oid}/${role}`;
      if (!columnsCache.has(k)) columnsCache.set(k, tableColumns(sql, oid, role));
      return columnsCache.get(k)!;
    };
    type Sub = { ch: Channel; b: Binding };
    interface Part {
      change: Change;
      entity: Entity;
      role: string;
      cols: TableColumn[];
      pk: TableColumn[];
      subs: Sub[];
      spans: { start: number; end: number; missing: boolean }[];
      base: Record<string, unknown>;
      commit_timestamp: string;
      passing?: Sub[];
    }
    // In commit order: an error for some subscribers right away, or a part whose filters, RLS and records are settled below.
    const out: ({ error: true; subs: Sub[]; data: Record<string, unknown> } | { error: false; part: Part })[] = [];
    const checks: FilterCheck[] = [];
    for (const change of changes) {
      const oid = change.relation.oid;
      const matching = live.filter((ch) => change.commitTime.getTime() >= ch.since).flatMap((ch) =>
        ch.bindings
          .filter((b) => (b.params.action === '*' || b.params.action === change.action) && b.entities.some((e) => e.oid === oid))
          .map((b) => ({ ch, b, entity: b.entities.find((e) => e.oid === oid)! })),
      );
      if (!matching.length) continue;
      const entity = matching[0]!.entity;
      const base = { schema: change.relation.schema, table: change.relation.table, type: change.action };
      const commit_timestamp = change.commitTime.toISOString();
      // Per role (apply_rls's outer loop).
      for (const role of [...new Set(matching.map((x) => x.ch.claims.role))].sort()) {
        const subs = matching.filter((x) => x.ch.claims.role === role).map(({ ch, b }) => ({ ch, b }));
        const cols = await columnsOf(oid, role);
        const pk = cols.filter((c) => c.pkey);
        if (change.action !== 'DELETE' && !pk.length) {
          out.push({ error: true, subs, data: { ...base, errors: ['Error 400: Bad Request, no primary key'] } });
          continue;
        }
        if (change.action !== 'DELETE' && pk.some((c) => !c.selectable)) {
          out.push({ error: true, subs, data: { ...base, errors: ['Error 401: Unauthorized'] } });
          continue;
        }
        // Filters, on the new row (and for a delete, on the old row's identity).
        const rowFor = change.action === 'DELETE' ? change.old! : change.new!;
        const types = new Map(cols.map((c) => [c.name, c.sqlType]));
        const spans = subs.map(({ b }) => {
          const start = checks.length;
          let missing = false;
          for (const f of b.params.filters) {
            const v = rowFor.get(f.column);
            if (v === undefined || !types.has(f.column)) missing = true;
            else checks.push({ value: v, sqlType: types.get(f.column)!, filter: f });
          }
          return { start, end: checks.length, missing };
        });
        out.push({ error: false, part: { change, entity, role, cols, pk, subs, spans, base, commit_timestamp } });
      }
    }
    const parts = out.flatMap((o) => (o.error ? [] : [o.part]));

    // Every filter of the batch (in slices: a statement takes at most 65,535 parameters, a check two).
    const results: boolean[] = [];
    for (let i = 0; i < checks.length; i += 10_000) {
      const slice = checks.slice(i, i + 10_000);
      stats.deliveryQueries++;
      try {
        results.push(...(await evaluateFilters(sql, slice)));
      } catch (e) {
        log(`realtime: evaluating filters failed: ${e instanceof Error ? e.message : String(e)}`);
        results.push(...slice.map(() => false));
      }
    }
    for (const p of parts) p.passing = p.subs.filter((_, i) => !p.spans[i]!.missing && results.slice(p.spans[i]!.start, p.spans[i]!.end).every(Boolean));

    // RLS: each row as it is now, selected as the subscriber (deletes cannot be checked: sent to all, key only),
    // every row of one table for one role and claims in one query.
    const rlsGroups = new Map<string, { entity: Entity; pk: TableColumn[]; role: string; claims: string; keys: Record<string, string | null>[]; asks: { p: Part; group: Sub[] }[] }>();
    for (const p of parts) {
      if (!p.passing!.length || !p.entity.rls || p.change.action === 'DELETE') continue;
      const key = Object.fromEntries(p.pk.map((c) => [c.name, (p.change.new!.get(c.name) ?? null) as string | null]));
      const byClaims = new Map<string, Sub[]>();
      for (const s of p.passing!) {
        const k = JSON.stringify(s.ch.claims);
        byClaims.set(k, [...(byClaims.get(k) ?? []), s]);
      }
      for (const [claims, group] of byClaims) {
        const g = `${p.entity.oid}/${p.role}/${claims}`;
        if (!rlsGroups.has(g)) rlsGroups.set(g, { entity: p.entity, pk: p.pk, role: p.role, claims, keys: [], asks: [] });
        const entry = rlsGroups.get(g)!;
        entry.keys.push(key);
        entry.asks.push({ p, group });
      }
      p.passing = [];
    }
    for (const g of rlsGroups.values()) {
      const visible = await visibleRows(sql, g.entity, g.pk, g.role, g.claims, g.keys);
      g.asks.forEach(({ p, group }, i) => {
        if (visible.has(i)) p.passing!.push(...group);
      });
    }
    // Keep each change's subscribers in the order they subscribed (RLS groups gathered them by claims).
    for (const p of parts) p.passing = p.subs.filter((s) => p.passing!.includes(s));

    // The payloads per selected-columns group, their records cast to the table's types, one query per table.
    interface Payload { group: Sub[]; data: Record<string, unknown> }
    const payloads = new Map<Part, Payload[]>();
    const casts = new Map<number, { entity: Entity; rows: Record<string, unknown>[]; into: { data: Record<string, unknown>; field: 'record' | 'old_record' }[] }>();
    const cast = (entity: Entity, row: Record<string, unknown>, data: Record<string, unknown>, field: 'record' | 'old_record') => {
      if (!casts.has(entity.oid)) casts.set(entity.oid, { entity, rows: [], into: [] });
      casts.get(entity.oid)!.rows.push(row);
      casts.get(entity.oid)!.into.push({ data, field });
    };
    for (const p of parts) {
      if (!p.passing!.length) continue;
      const { change, cols } = p;
      const groups = new Map<string, Sub[]>();
      for (const s of p.passing!) {
        const k = JSON.stringify(s.b.params.selectedColumns);
        groups.set(k, [...(groups.get(k) ?? []), s]);
      }
      const list: Payload[] = [];
      for (const [k, group] of groups) {
        const selected = JSON.parse(k) as string[] | null;
        const shown = (c: TableColumn) => c.selectable && (!selected || selected.includes(c.name) || c.pkey);
        const columns = cols.filter(shown).map((c) => ({ name: c.name, type: c.typname }));
        const textRow = (row: Map<string, unknown>, keyOnly: boolean) => {
          const o: Record<string, unknown> = {};
          for (const c of cols) {
            if (!shown(c) || (keyOnly && !c.pkey)) continue;
            const v = row.get(c.name);
            if (v === undefined) continue;
            o[c.name] = v !== null && (c.typname === 'json' || c.typname === 'jsonb') ? JSON.parse(v as string) : v;
          }
          return o;
        };
        const data: Record<string, unknown> = { ...p.base, commit_timestamp: p.commit_timestamp, columns, errors: null };
        if (change.action !== 'DELETE') cast(p.entity, textRow(change.new!, false), data, 'record');
        if (change.action !== 'INSERT') {
          // With the default replica identity the old row is its key: from the old tuple if sent, else the
          // new row's; a delete on a table with RLS shows only the key (its visibility cannot be checked).
          const old = change.old ?? change.new!;
          const keyOnly = !change.old || change.oldKeyOnly || (change.action === 'DELETE' && p.entity.rls);
          cast(p.entity, textRow(old, keyOnly), data, 'old_record');
        }
        list.push({ group, data });
      }
      payloads.set(p, list);
    }
    for (const c of casts.values()) {
      const typed = await typedRecords(sql, c.entity, c.rows);
      c.into.forEach(({ data, field }, i) => (data[field] = typed[i]));
    }

    // Sent in commit order.
    for (const o of out) {
      if (o.error) sendEach(o.subs, () => o.data);
      else for (const { group, data } of payloads.get(o.part) ?? []) sendEach(group, () => data);
    }
    stats.deliveryQueries += columnsCache.size + rlsGroups.size + casts.size;
  }

  /** One postgres_changes message per channel, naming its bindings that receive the change. */
  function sendEach(subs: { ch: Channel; b: Binding }[], data: () => unknown) {
    const byChannel = new Map<Channel, number[]>();
    for (const { ch, b } of subs) byChannel.set(ch, [...(byChannel.get(ch) ?? []), b.id]);
    const d = data();
    for (const [ch, ids] of byChannel) {
      stats.delivered++;
      send(ch.conn, { join_ref: null, ref: null, topic: ch.topic, event: 'postgres_changes', payload: { ids: [...new Set(ids)], data: d } });
    }
  }

  const feed: ChangeFeed = await startChangeFeed(opts.dbUrl, {
    publication,
    pollMs: opts.pollMs,
    log,
    hasListeners: () => channels().some((c) => c.active),
    onChanges: async (changes) => {
      try {
        await deliver(changes);
      } catch (e) {
        log(`realtime: delivering changes failed: ${e instanceof Error ? e.stack : String(e)}`);
      }
    },
  }).catch(async (e) => {
    await sql.end({ timeout: 1 });
    throw e;
  });

  return {
    handleUpgrade(req, socket, head) {
      const u = new URL(req.url ?? '/', 'http://realtime');
      const refuse = (status: number, error: string) => {
        stats.refusedSockets++;
        const body = JSON.stringify({ error });
        socket.end(`HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : 'Bad Request'}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
      };
      const vsn = u.searchParams.get('vsn') ?? '1.0.0';
      if (vsn !== '1.0.0' && vsn !== '2.0.0') return refuse(400, `Unsupported serializer version ${vsn}`);
      const apiKey = (req.headers['x-api-key'] as string | undefined) ?? u.searchParams.get('apikey');
      if (!apiKey) return refuse(401, 'API key is missing');
      void checkToken(apiKey, opts.jwks).then((check) => {
        if (!check.ok) return refuse(401, SOCKET_REFUSAL[check.refusal.reason]);
        wss.handleUpgrade(req, socket, head, (ws) => {
          const conn: Connection = { ws, vsn, apiKeyToken: apiKey, channels: new Map() };
          connections.add(conn);
          ws.on('message', (data, isBinary) => {
            if (isBinary) return; // binary user broadcasts: not served
            const m = parseFrame(conn, data.toString());
            if (m) void onMessage(conn, m).catch((e) => log(`realtime: ${e instanceof Error ? e.message : String(e)}`));
          });
          ws.on('close', () => {
            for (const ch of conn.channels.values()) closeChannel(ch, false);
            connections.delete(conn);
          });
          ws.on('error', () => ws.terminate());
        });
      });
    },
    stats: () => ({
      sockets: connections.size,
      channels: channels().length,
      subscriptions: channels().reduce((n, c) => n + (c.active ? c.bindings.length : 0), 0),
      ...stats,
    }),
    async close() {
      for (const conn of connections) {
        for (const ch of conn.channels.values()) {
          clearTimeout(ch.confirmTimer);
          clearTimeout(ch.resubscribeTimer);
        }
        conn.ws.terminate();
      }
      connections.clear();
      wss.close();
      await feed.stop();
      await sql.end({ timeout: 2 });
    },
  };
}
