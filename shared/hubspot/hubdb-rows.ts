// Pages through every HubDB table's rows behind one opaque cursor ({ tableId, after } as JSON).

import { HubSpotError, HubSpotRequestError } from './errors.ts';
import type { ListFn, RowsFn } from './endpoints.ts';
import type { Transport } from './transport.ts';

export interface HubDbTableRef {
  id: string;
  name: string | null;
  rowCount: number | null;
}

interface RowsCursor {
  tableId: string;
  after: string | null;
}

export interface RowsPage {
  rows: { table: HubDbTableRef; row: unknown }[];
  nextCursor: string | null;
}

const TABLE_CACHE_MS = 60_000;

// Numeric-string order (HubDB ids are integers that may exceed 2^53 in theory).
function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

function encode(cursor: RowsCursor): string {
  return JSON.stringify(cursor);
}

function decode(text: string): RowsCursor {
  try {
    const value = JSON.parse(text) as Partial<RowsCursor>;
    if (typeof value.tableId === 'string' && (value.after === null || typeof value.after === 'string')) {
      return { tableId: value.tableId, after: value.after };
    }
  } catch {
    // fall through
  }
  throw new HubSpotError('Invalid hubdb_rows cursor.', false, { status: null });
}

/** Walks HubDB tables in id order and their rows by `after`, as one resumable cursor. */
export class HubDbRowsPager {
  private cache: { at: number; tables: HubDbTableRef[] } | null = null;

  constructor(
    private readonly transport: Transport,
    private readonly listTables: ListFn,
    private readonly listRows: RowsFn,
    private readonly tablePageSize: number,
    private readonly rowPageSize: number,
  ) {}

  // All live tables in id order (cached briefly so paging rows costs one extra request per minute).
  async tables(fresh = false): Promise<HubDbTableRef[]> {
    if (!fresh && this.cache && Date.now() - this.cache.at < TABLE_CACHE_MS) return this.cache.tables;
    const tables: HubDbTableRef[] = [];
    let after: string | undefined;
    do {
      const page = await this.transport.run((probe) => this.listTables(after, this.tablePageSize, probe));
      for (const raw of page.results as { id?: unknown; name?: unknown; rowCount?: unknown }[]) {
        tables.push({
          id: String(raw.id),
          name: typeof raw.name === 'string' ? raw.name : null,
          rowCount: typeof raw.rowCount === 'number' ? raw.rowCount : null,
        });
      }
      after = page.after ?? undefined;
    } while (after);
    tables.sort((a, b) => compareIds(a.id, b.id));
    this.cache = { at: Date.now(), tables };
    return tables;
  }

  // Next page of rows; skips empty or vanished tables so a page is empty only at the very end.
  async fetchPage(cursorText: string | null): Promise<RowsPage> {
    const tables = await this.tables();
    const cursor = cursorText === null ? null : decode(cursorText);
    let index = cursor === null ? 0 : tables.findIndex((t) => compareIds(t.id, cursor.tableId) >= 0);
    let after = cursor !== null && tables[index]?.id === cursor.tableId ? cursor.after : null;
    while (index >= 0 && index < tables.length) {
      const table = tables[index]!;
      let page: { results: unknown[]; after: string | null };
      try {
        page = await this.transport.run((probe) => this.listRows(table.id, after ?? undefined, this.rowPageSize, probe));
      } catch (error) {
        if (!(error instanceof HubSpotRequestError && error.status === 404)) throw error;
        page = { results: [], after: null }; // table deleted since we listed tables
      }
      const rows = page.results.map((row) => ({ table, row }));
      if (page.after) return { rows, nextCursor: encode({ tableId: table.id, after: page.after }) };
      const next = tables[index + 1];
      if (rows.length > 0) return { rows, nextCursor: next ? encode({ tableId: next.id, after: null }) : null };
      index++;
      after = null;
    }
    return { rows: [], nextCursor: null };
  }

  // Total rows over all tables: the tables list's rowCount, or a limit=1 call where it is missing.
  async countRows(): Promise<number> {
    let total = 0;
    for (const table of await this.tables(true)) {
      if (table.rowCount !== null) total += table.rowCount;
      else total += (await this.transport.run((probe) => this.listRows(table.id, undefined, 1, probe))).total;
    }
    return total;
  }
}
