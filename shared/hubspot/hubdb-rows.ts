// Pages through every HubDB table's rows behind one opaque cursor ({ tableId, after } as JSON).
// A rows page goes on unparsed, with the table it belongs to; Postgres turns it into items
// (`<tableId>:<rowId>`, the table id merged in: nothing else of the table, whose name
// lives in its hubdb_tables item, so a rename rewrites no row) and computes the next cursor the same way.

import { nextAfter, listQuery, LIST_PATHS, rowsPath, ROWS_UPDATED_COLUMN } from './endpoints.ts';
import { HubSpotError, HubSpotRequestError } from './errors.ts';
import type { Transport } from './transport.ts';

export interface HubDbTableRef {
  id: string;
  name: string | null;
  rowCount: number | null;
  /** The table's updatedAt (HubSpot moves it when the table is published with changed rows). */
  updatedAt: string | null;
}

/**
 * Which table a rows page belongs to, and which table comes after it (null: the last).
 * `tableUpdatedAt` is the table's update time when its first page is read (the
 * sync mark of HubDB rows: a row changed behind the cursor moves the table past it).
 */
export interface HubDbRowsContext {
  tableId: string | null;
  nextTableId: string | null;
  tableUpdatedAt?: string | null;
}

/**
 * An incremental read of HubDB rows, in two passes (`phase`): the rows changed after
 * `since` in the tables updated since (`changed`), then a `sweep` (`storedRows`: table
 * id → live rows stored, counted when the pass starts) of every table holding fewer
 * rows (`rowCount`) than are stored, in its place (read whole once: a page with its rows
 * changed since and `missingIds`, the ids `storedRowIds` gives that HubSpot no longer
 * lists: tombstones), and of every stored table no longer live (no request: all its
 * stored ids). Without `storedRows` every changed table is swept, and no gone table is.
 */
export interface RowsSync {
  since: string;
  phase: 'changed' | 'sweep';
  storedRows: Readonly<Record<string, number>> | null;
  /** The row ids (no `<tableId>:`) of a table's live rows stored: required for a sweep (decision 0057). */
  storedRowIds?: (tableId: string) => Promise<string[]>;
}

/**
 * Where a pager gets the HubDB tables list (every page, as HubSpot sent it): `read`
 * asks HubSpot; a fetch job's source gives the list its run stored instead, when
 * another job of the run read it (functions/worker/tables-list.ts, decision 0045).
 */
export type TablesListSource = (read: () => Promise<string[]>) => Promise<string[]>;

export interface RawRowsPage {
  body: string;
  context: HubDbRowsContext;
}

interface RowsCursor {
  tableId: string;
  after: string | null;
}

/** The tables list as read: each page's body and the cursor after it, and the tables in id order. */
interface TablesList {
  at: number;
  /** From a source (a run's list: kept for the pager's life), or read here (kept TABLE_CACHE_MS). */
  shared: boolean;
  pages: { body: string; next: string | null }[];
  tables: HubDbTableRef[];
}

const TABLE_CACHE_MS = 60_000;
/** Rows bodies up to this many characters are parsed to see whether the table had no rows at all (an empty page is skipped). */
const EMPTY_CHECK_MAX_CHARS = 1024;
/** The page saved when no table has rows left: no items, no next cursor. */
const END_OF_TABLES = '{"results":[]}';

// Numeric-string order (HubDB ids are integers that may exceed 2^53 in theory).
function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** The cursor text (save_fetched_page_raw writes the same text). */
export function encodeRowsCursor(cursor: RowsCursor): string {
  return JSON.stringify({ tableId: cursor.tableId, after: cursor.after });
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

/** A rows listing of only the rows changed after `sinceMs`, oldest first. */
function changedRowsQuery(after: string | null, limit: number, sinceMs: number): Record<string, string> {
  return { ...listQuery(after, limit), [`${ROWS_UPDATED_COLUMN}__gt`]: String(sinceMs), sort: ROWS_UPDATED_COLUMN };
}

/** The tables list's pages (each body and the cursor after it) and its tables in id order. */
function parseTablesList(bodies: readonly string[]): Pick<TablesList, 'pages' | 'tables'> {
  const pages: TablesList['pages'] = [];
  const tables: HubDbTableRef[] = [];
  for (const body of bodies) {
    // The tables list is small (a handful of tables): parsed here.
    const page = parseList(body, 'HubDB tables');
    for (const raw of page.results as { id?: unknown; name?: unknown; rowCount?: unknown; updatedAt?: unknown }[]) {
      tables.push({
        id: String(raw.id),
        name: typeof raw.name === 'string' ? raw.name : null,
        rowCount: typeof raw.rowCount === 'number' ? raw.rowCount : null,
        updatedAt: typeof raw.updatedAt === 'string' ? raw.updatedAt : null,
      });
    }
    pages.push({ body, next: nextAfter(page) });
  }
  tables.sort((a, b) => compareIds(a.id, b.id));
  return { pages, tables };
}

// True for a small body with no rows and no next page (an empty table).
function isEmptyLastPage(body: string): boolean {
  if (body.length > EMPTY_CHECK_MAX_CHARS) return false;
  try {
    const page = JSON.parse(body) as { results?: unknown; paging?: { next?: { after?: unknown } } };
    return Array.isArray(page.results) && page.results.length === 0 && nextAfter(page) === null;
  } catch {
    return false; // malformed: let the database reject it
  }
}

/** Walks HubDB tables in id order and their rows by `after`, as one resumable cursor. */
export class HubDbRowsPager {
  private cache: TablesList | null = null;

  constructor(
    private readonly transport: Transport,
    private readonly tablePageSize: number,
    private readonly rowPageSize: number,
  ) {}

  // All live tables in id order (cached briefly so paging rows costs one extra request per minute;
  // from `source`, the run's one list, for the pager's life).
  async tables(fresh = false, signal?: AbortSignal, source?: TablesListSource): Promise<HubDbTableRef[]> {
    return (await this.list(fresh, signal, source)).tables;
  }

  /**
   * The tables list's page after `cursor` (null: the first) as HubSpot sent it: a full
   * fetch of HubDB tables reads the list the run's rows job uses. A cursor the list does
   * not hold (read for another list) is asked of HubSpot.
   */
  async tablesPage(cursor: string | null, signal?: AbortSignal, source?: TablesListSource): Promise<string> {
    const { pages } = await this.list(false, signal, source);
    const index = cursor === null ? 0 : pages.findIndex((p) => p.next === cursor) + 1;
    if ((index > 0 || cursor === null) && index < pages.length) return pages[index]!.body;
    return this.transport.get(LIST_PATHS.hubdb_tables, listQuery(cursor, this.tablePageSize), signal);
  }

  private async list(fresh: boolean, signal: AbortSignal | undefined, source: TablesListSource | undefined): Promise<TablesList> {
    const c = this.cache;
    if (!fresh && c && (source ? c.shared : Date.now() - c.at < TABLE_CACHE_MS)) return c;
    const bodies = source ? await source(() => this.readPages(signal)) : await this.readPages(signal);
    this.cache = { at: Date.now(), shared: source !== undefined, ...parseTablesList(bodies) };
    return this.cache;
  }

  /**
   * A probe near HubDB rows' last change (decision 0055): for each table of the list
   * updated after `windowAfter` (or with no update time), the first page of its rows
   * updated after it, oldest first, as HubSpot sent it: what the incremental fetch would
   * read first. Table id → page; all asked at once.
   */
  async readWindows(tablesPages: readonly string[], windowAfter: string, signal?: AbortSignal): Promise<Record<string, string>> {
    const sinceMs = Date.parse(windowAfter);
    const recent = parseTablesList(tablesPages).tables.filter((t) => t.updatedAt === null || Date.parse(t.updatedAt) > sinceMs);
    const pages = await Promise.all(recent.map(async (t) => [t.id, await this.transport.get(rowsPath(t.id), changedRowsQuery(null, this.rowPageSize, sinceMs), signal)] as const));
    return Object.fromEntries(pages);
  }

  // Every page of the tables list from HubSpot, as it sent them.
  async readPages(signal?: AbortSignal): Promise<string[]> {
    const bodies: string[] = [];
    let after: string | null = null;
    do {
      const text = await this.transport.get(LIST_PATHS.hubdb_tables, listQuery(after, this.tablePageSize), signal);
      bodies.push(text);
      after = nextAfter(parseList(text, 'HubDB tables'));
    } while (after);
    return bodies;
  }

  // Next page of rows as text, with its table; skips empty or vanished tables so a page is empty only at the very end.
  // With `sync` (an incremental read) its pass picks the tables and how each is read (RowsSync),
  // and an empty page is kept (its table's mark).
  async fetchRawPage(cursorText: string | null, signal?: AbortSignal, sync: RowsSync | null = null, source?: TablesListSource): Promise<RawRowsPage> {
    const live = await this.tables(false, signal, source);
    const sinceMs = sync === null ? null : Date.parse(sync.since);
    const stored = sync?.storedRows ?? null;
    const changed = (t: HubDbTableRef) => t.updatedAt === null || Date.parse(t.updatedAt) > sinceMs!;
    const lostRows = (t: HubDbTableRef) => (stored === null ? changed(t) : t.rowCount === null || (stored[t.id] ?? 0) > t.rowCount);
    const sweep = sync?.phase === 'sweep';
    // A table that lost rows is swept (which also gives its changed rows) instead of read filtered; a
    // table whose new rows hide lost ones from its rowCount is swept after its new rows are read.
    let tables = sync === null ? live : live.filter(sweep ? lostRows : (t) => changed(t) && !(stored !== null && lostRows(t)));
    if (sweep && stored !== null) {
      const liveIds = new Set(live.map((t) => t.id));
      const gone = Object.keys(stored).filter((id) => !liveIds.has(id)).map((id): HubDbTableRef => ({ id, name: null, rowCount: 0, updatedAt: null }));
      tables = [...tables, ...gone].sort((a, b) => compareIds(a.id, b.id));
    }
    const cursor = cursorText === null ? null : decode(cursorText);
    let index = cursor === null ? 0 : tables.findIndex((t) => compareIds(t.id, cursor.tableId) >= 0);
    let after = cursor !== null && tables[index]?.id === cursor.tableId ? cursor.after : null;
    while (index >= 0 && index < tables.length) {
      const table = tables[index]!;
      const nextTableId = tables[index + 1]?.id ?? null;
      if (sweep) {
        if (!sync!.storedRowIds) throw new TypeError('a sweep of HubDB rows needs the stored row ids (storedRowIds)');
        // A table no longer live, or gone since it was listed: none of its stored rows is left.
        const swept = live.some((t) => t.id === table.id) ? await this.sweepTable(table.id, sinceMs!, signal) : null;
        // Compared here, not in Postgres: there a sweep is then one index-only read of the table's ids (decision 0057).
        const listed = new Set(swept?.ids ?? []);
        const missing = (await sync!.storedRowIds(table.id)).filter((id) => !listed.has(id));
        const context: HubDbRowsContext = { tableId: table.id, nextTableId, tableUpdatedAt: swept ? table.updatedAt : null };
        return { body: `{"results":[${swept?.changed.join(',') ?? ''}],"missingIds":${JSON.stringify(missing)}}`, context };
      }
      // The table's update time as of its first page only: a change behind the cursor moves it past the mark.
      const context: HubDbRowsContext = { tableId: table.id, nextTableId, tableUpdatedAt: after === null ? table.updatedAt : null };
      const query = sync !== null ? changedRowsQuery(after, this.rowPageSize, sinceMs!) : listQuery(after, this.rowPageSize);
      let body: string | null;
      try {
        body = await this.transport.get(rowsPath(table.id), query, signal);
      } catch (error) {
        if (!(error instanceof HubSpotRequestError && error.status === 404)) throw error;
        body = null; // table deleted since we listed tables
      }
      if (body !== null && (sync !== null || !isEmptyLastPage(body))) return { body, context };
      index++;
      after = null;
    }
    return { body: END_OF_TABLES, context: { tableId: null, nextTableId: null } };
  }

  // A whole table, every page read (a table holds at most 10,000 rows: HubSpot's limit): the ids
  // of all its rows, and the rows changed after `sinceMs` (what the filtered listing would give), as
  // HubSpot sent them; null when the table is gone. Read again whole if the job is cut off before it is saved.
  private async sweepTable(tableId: string, sinceMs: number, signal?: AbortSignal): Promise<{ ids: string[]; changed: string[] } | null> {
    const ids: string[] = [];
    const changed: string[] = [];
    let after: string | null = null;
    do {
      let text: string;
      try {
        text = await this.transport.get(rowsPath(tableId), listQuery(after, this.rowPageSize), signal);
      } catch (error) {
        if (error instanceof HubSpotRequestError && error.status === 404) return null;
        throw error;
      }
      const split = splitResults(text);
      if (split === null) throw new HubSpotError('HubSpot answered a HubDB rows page without a results array of rows.', true, { status: 200 });
      for (const raw of split.rows) {
        const row = JSON.parse(raw) as { id?: unknown; updatedAt?: unknown };
        if (typeof row.id !== 'string' && typeof row.id !== 'number') throw new HubSpotError('HubSpot answered a HubDB rows page with a row without an id.', true, { status: 200 });
        ids.push(String(row.id));
        // No readable update time: saved, as a listing would (the store compares it).
        if (typeof row.updatedAt !== 'string' || !(Date.parse(row.updatedAt) <= sinceMs)) changed.push(raw);
      }
      after = nextAfter(parseList(split.envelope, 'HubDB rows'));
    } while (after);
    return { ids, changed };
  }

  // Total rows over all tables: the tables list's rowCount, or a limit=1 call where it is missing.
  async countRows(): Promise<number> {
    let total = 0;
    for (const table of await this.tables(true)) {
      if (table.rowCount !== null) total += table.rowCount;
      else total += parseList(await this.transport.get(rowsPath(table.id), listQuery(null, 1)), 'HubDB rows').total;
    }
    return total;
  }
}

const WHITESPACE = new Set([' ', '\t', '\n', '\r']);

/**
 * A list page's rows as HubSpot sent them (each object of the top-level `results` array, its
 * bytes untouched: a JSON round trip would reformat numbers and round integers past 2^53), and
 * the page without them (`results` empty, paging kept). Null when there is no such array, or it
 * holds something other than objects.
 */
export function splitResults(text: string): { rows: string[]; envelope: string } | null {
  const rows: string[] = [];
  let depth = 0;
  let arrayStart = -1; // the results array's `[`
  let arrayEnd = -1;
  let rowStart = -1;
  let resultsKey = false; // the string just read at depth 1 is the key "results"
  const inArray = () => arrayStart >= 0 && arrayEnd < 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      const start = i;
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
      if (inArray() && depth === 2) return null; // a string where a row should be
      if (depth === 1 && arrayStart < 0 && text.slice(start + 1, i) === 'results') {
        let j = i + 1;
        while (WHITESPACE.has(text[j] ?? '')) j++;
        resultsKey = text[j] === ':';
      }
      continue;
    }
    if (c === '{' || c === '[') {
      depth++;
      if (resultsKey && depth === 2) {
        if (c !== '[') return null;
        arrayStart = i;
      } else if (inArray() && depth === 3) {
        if (c !== '{') return null;
        rowStart = i;
      }
      resultsKey = false;
    } else if (c === '}' || c === ']') {
      if (inArray() && depth === 3) rows.push(text.slice(rowStart, i + 1));
      else if (inArray() && depth === 2) arrayEnd = i;
      depth--;
    } else if (inArray() && depth === 2 && c !== ',' && !WHITESPACE.has(c)) {
      return null; // a number or literal where a row should be
    } else if (resultsKey && c !== ':' && !WHITESPACE.has(c)) {
      resultsKey = false;
    }
  }
  if (arrayStart < 0 || arrayEnd < 0) return null;
  return { rows, envelope: text.slice(0, arrayStart + 1) + text.slice(arrayEnd) };
}

/** A small list response (tables, or a limit=1 count): results, total and paging. */
export function parseList(text: string, what: string): { results: unknown[]; total: number; paging?: { next?: { after?: unknown } } } {
  let page: { results?: unknown; total?: unknown; paging?: { next?: { after?: unknown } } };
  try {
    page = JSON.parse(text) as typeof page;
  } catch {
    throw new HubSpotError(`HubSpot answered the ${what} list with a body that is not JSON.`, true, { status: 200 });
  }
  if (!page || typeof page !== 'object' || !Array.isArray(page.results)) {
    throw new HubSpotError(`HubSpot answered the ${what} list without a results array.`, true, { status: 200 });
  }
  return { results: page.results, total: typeof page.total === 'number' ? page.total : 0, paging: page.paging };
}
