// Decodes the messages of Postgres's built-in `pgoutput` logical decoding
// plugin, protocol version 1 (text tuples), as pg_logical_slot_get_binary_changes
// returns them: one message per row. Only what the Realtime stand-in needs:
// Begin (commit time), Relation (columns), Insert, Update, Delete, Commit;
// Type, Origin, Truncate and Message are skipped. Wire format: the Postgres docs,
// "Logical Replication Message Formats".

/** A column value: text (the type's output), null, or undefined for an unchanged TOASTed value. */
export type TupleValue = string | null | undefined;

export interface RelationColumn {
  name: string;
  typeOid: number;
  /** Part of the replica identity key. */
  key: boolean;
}

export interface Relation {
  oid: number;
  schema: string;
  table: string;
  columns: RelationColumn[];
}

export type PgOutputMessage =
  | { tag: 'begin'; commitTime: Date; xid: number }
  | { tag: 'commit' }
  | { tag: 'relation'; relation: Relation }
  | { tag: 'insert'; relationOid: number; new: TupleValue[] }
  | { tag: 'update'; relationOid: number; old: TupleValue[] | null; oldIsKeyOnly: boolean; new: TupleValue[] }
  | { tag: 'delete'; relationOid: number; old: TupleValue[]; oldIsKeyOnly: boolean }
  | { tag: 'other'; byte: string };

/** Microseconds between the Unix epoch and Postgres's (2000-01-01). */
const PG_EPOCH_US = 946_684_800_000_000n;

class Reader {
  pos = 0;
  constructor(private readonly buf: Buffer) {}
  byte(): string {
    return String.fromCharCode(this.buf[this.pos++]!);
  }
  int8(): number {
    return this.buf.readInt8(this.pos++);
  }
  int16(): number {
    const v = this.buf.readInt16BE(this.pos);
    this.pos += 2;
    return v;
  }
  int32(): number {
    const v = this.buf.readInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  uint32(): number {
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  int64(): bigint {
    const v = this.buf.readBigInt64BE(this.pos);
    this.pos += 8;
    return v;
  }
  cstring(): string {
    const end = this.buf.indexOf(0, this.pos);
    const s = this.buf.toString('utf8', this.pos, end);
    this.pos = end + 1;
    return s;
  }
  bytes(n: number): Buffer {
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
  tuple(): TupleValue[] {
    const n = this.int16();
    const values: TupleValue[] = [];
    for (let i = 0; i < n; i++) {
      const kind = this.byte();
      if (kind === 'n') values.push(null);
      else if (kind === 'u') values.push(undefined);
      else if (kind === 't') values.push(this.bytes(this.int32()).toString('utf8'));
      else throw new Error(`pgoutput: tuple value kind ${kind} (binary tuples are not requested)`);
    }
    return values;
  }
}

export function decodePgOutput(buf: Buffer): PgOutputMessage {
  const r = new Reader(buf);
  const tag = r.byte();
  switch (tag) {
    case 'B': {
      r.int64(); // final LSN of the transaction
      const us = r.int64() + PG_EPOCH_US;
      return { tag: 'begin', commitTime: new Date(Number(us / 1000n)), xid: r.uint32() };
    }
    case 'C':
      return { tag: 'commit' };
    case 'R': {
      const oid = r.uint32();
      const schema = r.cstring();
      const table = r.cstring();
      r.int8(); // replica identity setting
      const n = r.int16();
      const columns: RelationColumn[] = [];
      for (let i = 0; i < n; i++) {
        const flags = r.int8();
        const name = r.cstring();
        const typeOid = r.uint32();
        r.int32(); // type modifier
        columns.push({ name, typeOid, key: (flags & 1) === 1 });
      }
      return { tag: 'relation', relation: { oid, schema, table, columns } };
    }
    case 'I': {
      const relationOid = r.uint32();
      r.byte(); // 'N'
      return { tag: 'insert', relationOid, new: r.tuple() };
    }
    case 'U': {
      const relationOid = r.uint32();
      let kind = r.byte();
      let old: TupleValue[] | null = null;
      let oldIsKeyOnly = false;
      if (kind === 'K' || kind === 'O') {
        oldIsKeyOnly = kind === 'K';
        old = r.tuple();
        kind = r.byte(); // 'N'
      }
      return { tag: 'update', relationOid, old, oldIsKeyOnly, new: r.tuple() };
    }
    case 'D': {
      const relationOid = r.uint32();
      const kind = r.byte();
      return { tag: 'delete', relationOid, old: r.tuple(), oldIsKeyOnly: kind === 'K' };
    }
    default:
      return { tag: 'other', byte: tag };
  }
}
