// The change feed of the Realtime stand-in: a temporary logical replication
// slot with Postgres's built-in pgoutput plugin, restricted to the
// publication (supabase_realtime), polled with pg_logical_slot_get_binary_changes
// as hosted Realtime polls its slot (there with wal2json, which a plain
// Postgres lacks). Only committed transactions come out, in commit order. The
// slot is temporary: it lives as long as this connection, so a crashed stand-in
// leaves no slot retaining WAL. Needs wal_level=logical (the embedded Postgres
// is started with it). Rationale: docs/decisions/0040-realtime-stand-in.md.
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { decodePgOutput, type Relation, type TupleValue } from './pgoutput.ts';

export type ChangeAction = 'INSERT' | 'UPDATE' | 'DELETE';

export interface Change {
  action: ChangeAction;
  relation: Relation;
  commitTime: Date;
  /** New row (INSERT, UPDATE) by column name; undefined values: unchanged TOASTed, not sent. */
  new: Map<string, TupleValue> | null;
  /** The old row's replica identity (UPDATE when the key changed or identity is FULL, DELETE). */
  old: Map<string, TupleValue> | null;
  /** `old` holds only the key's values (the other columns read null): replica identity DEFAULT or USING INDEX. */
  oldKeyOnly: boolean;
}

export interface ChangeFeedOptions {
  publication: string;
  /** Called with each polled batch (committed transactions, in order). */
  onChanges(changes: Change[]): Promise<void>;
  /** Whether anyone listens: polls every pollMs then, and every idlePollMs otherwise (draining the slot). */
  hasListeners(): boolean;
  pollMs?: number;
  idlePollMs?: number;
  log?: (line: string) => void;
}

export interface ChangeFeed {
  slotName: string;
  /** Polls now (someone started listening). */
  poke(): void;
  stop(): Promise<void>;
}

const MAX_CHANGES_PER_POLL = 1000;

function byName(relation: Relation, values: TupleValue[]): Map<string, TupleValue> {
  return new Map(relation.columns.map((c, i) => [c.name, values[i]]));
}

/** Checks wal_level and creates the slot on a connection of its own; then polls until stop(). */
export async function startChangeFeed(dbUrl: string, opts: ChangeFeedOptions): Promise<ChangeFeed> {
  // One long-lived session: the temporary slot belongs to it.
  const sql = postgres(dbUrl, { max: 1, prepare: false, idle_timeout: 0, max_lifetime: 60 * 60 * 24 * 20, onnotice: () => {}, connection: { application_name: 'realtime-stand-in' } });
  const [{ wal_level: walLevel }] = (await sql`select current_setting('wal_level') as wal_level`) as unknown as [{ wal_level: string }];
  if (walLevel !== 'logical') {
    await sql.end({ timeout: 1 });
    throw new Error(
      `the Realtime stand-in decodes the WAL, which needs wal_level=logical; this server has wal_level=${walLevel} ` +
        '(the embedded Postgres is started with it; set it on the server named by DATABASE_URL and restart it)',
    );
  }
  const slotName = `realtime_local_${process.pid}_${randomBytes(4).toString('hex')}`;
  const createSlot = () => sql`select pg_create_logical_replication_slot(${slotName}, 'pgoutput', true)`;
  await createSlot();

  const relations = new Map<number, Relation>();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let wake: (() => void) | null = null;
  const pollMs = opts.pollMs ?? 100;
  const idlePollMs = opts.idlePollMs ?? 1000;

  async function pollOnce(): Promise<number> {
    let rows: { data: Buffer }[];
    try {
      rows = (await sql`select data from pg_logical_slot_get_binary_changes(${slotName}, null, ${MAX_CHANGES_PER_POLL},
        'proto_version', '1', 'publication_names', ${opts.publication})`) as unknown as { data: Buffer }[];
    } catch (e) {
      if (stopped) return 0;
      // The session ended (server restart, network): the temporary slot went with it. Start over from now.
      if ((e as { code?: string }).code === '42704') {
        opts.log?.(`realtime: replication slot ${slotName} was gone; created again (changes in between are lost)`);
        await createSlot().catch(() => {});
        return 0;
      }
      throw e;
    }
    const changes: Change[] = [];
    let commitTime = new Date();
    for (const { data } of rows) {
      const m = decodePgOutput(data);
      if (m.tag === 'begin') commitTime = m.commitTime;
      else if (m.tag === 'relation') relations.set(m.relation.oid, m.relation);
      else if (m.tag === 'insert' || m.tag === 'update' || m.tag === 'delete') {
        const relation = relations.get(m.relationOid);
        if (!relation) continue; // pgoutput sends the relation before its first change: cannot happen
        if (m.tag === 'insert') changes.push({ action: 'INSERT', relation, commitTime, new: byName(relation, m.new), old: null, oldKeyOnly: false });
        else if (m.tag === 'update') changes.push({ action: 'UPDATE', relation, commitTime, new: byName(relation, m.new), old: m.old ? byName(relation, m.old) : null, oldKeyOnly: m.oldIsKeyOnly });
        else changes.push({ action: 'DELETE', relation, commitTime, new: null, old: byName(relation, m.old), oldKeyOnly: m.oldIsKeyOnly });
      }
    }
    if (changes.length && opts.hasListeners()) await opts.onChanges(changes);
    return rows.length;
  }

  async function run(): Promise<void> {
    while (!stopped) {
      let n = 0;
      try {
        n = await pollOnce();
      } catch (e) {
        if (!stopped) opts.log?.(`realtime: polling the slot failed: ${e instanceof Error ? e.message : String(e)}`);
      }
      if (stopped || n >= MAX_CHANGES_PER_POLL) continue; // more waiting: poll again at once
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, opts.hasListeners() ? pollMs : idlePollMs);
      });
      wake = null;
    }
  }
  const running = run();

  return {
    slotName,
    poke: () => wake?.(),
    async stop() {
      stopped = true;
      clearTimeout(timer);
      wake?.();
      await running;
      await sql.end({ timeout: 2 });
    },
  };
}
