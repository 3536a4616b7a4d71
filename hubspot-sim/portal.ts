// One simulated HubSpot portal: seeded content per type plus the mutations tests apply mid-run.

import { CONTENT_TYPES, type ContentType } from '../shared/hubspot/content-types.ts';
import { changed, Collection, itemBytes, type Body, type SimItem } from './collection.ts';
import {
  buildBlogAuthor, buildBlogPost, buildBlogTag, buildHubDbRow, buildHubDbTable, buildPage, buildUrlRedirect,
  type GenContext, type GenInput,
} from './generators.ts';
import { createRandom, randomInt, type Random } from './prng.ts';
import type { AccountTier } from './rate-limit.ts';

export type PortalSizes = Record<ContentType, number>;

export const SMALL_PORTAL_SIZES: Readonly<PortalSizes> = {
  site_pages: 300, landing_pages: 120, blog_posts: 1200, blog_authors: 25, blog_tags: 60,
  hubdb_tables: 3, hubdb_rows: 450, url_redirects: 150,
};

export const REALISTIC_PORTAL_SIZES: Readonly<PortalSizes> = {
  site_pages: 10_000, landing_pages: 2_000, blog_posts: 20_000, blog_authors: 200, blog_tags: 500,
  hubdb_tables: 5, hubdb_rows: 8_000, url_redirects: 1_000,
};

export interface PortalOptions {
  portalId: number;
  token: string;
  /** The account's subscription: its private apps' limits (default enterprise: 190 per 10 s, 1,000,000 a day). */
  tier?: AccountTier;
  /** The account bought the API limit increase (private apps: 250 per 10 s, 1,000,000 a day). */
  apiLimitIncrease?: boolean;
  /** The account's time zone (account details `timeZone`; the daily limit resets at midnight there). Default US/Eastern. */
  timeZone?: string;
  /** Share (0..1) of the private apps' interval limit another app of the account spends, steadily. Default 0. */
  otherAppsShare?: number;
  sizes?: Partial<PortalSizes>;
  seed?: number;
  scopes?: string[];
  hubdbTables?: number;
  /**
   * Render every item's wire JSON now instead of on its first request. A
   * benchmark sets it so the stand-in for HubSpot (a remote service) spends
   * its JSON-encoding CPU before the measured phase, not on the same cores.
   */
  prerender?: boolean;
}

/** What `items()` reports: wire id, a portal-unique key (`${tableId}:${rowId}` for HubDB rows). */
export interface ItemSummary {
  id: string;
  key: string;
  updatedAt: string;
  tableId?: string;
}

const ID_BASE: Record<ContentType, number> = {
  site_pages: 41_000_000_000, landing_pages: 42_000_000_000, blog_posts: 43_000_000_000,
  blog_authors: 44_000_000_000, blog_tags: 45_000_000_000, hubdb_tables: 5_000_000,
  hubdb_rows: 160_000_000_000, url_redirects: 46_000_000_000,
};

const START_MS = Date.UTC(2019, 0, 1);
const SEED_NOW_MS = Date.UTC(2025, 5, 1);

type Builder = (ctx: GenContext, input: GenInput) => Body;
const BUILDERS: Record<ContentType, Builder> = {
  site_pages: (c, i) => buildPage(c, i, 'site'),
  landing_pages: (c, i) => buildPage(c, i, 'landing'),
  blog_posts: buildBlogPost,
  blog_authors: buildBlogAuthor,
  blog_tags: buildBlogTag,
  hubdb_tables: buildHubDbTable,
  hubdb_rows: buildHubDbRow,
  url_redirects: buildUrlRedirect,
};

// HubDB uses createdAt/updatedAt; every other CMS v3 type uses created/updated.
export function updatedField(type: ContentType): 'updated' | 'updatedAt' {
  return type === 'hubdb_tables' || type === 'hubdb_rows' ? 'updatedAt' : 'updated';
}

/** A portal's content and its mutation helpers. */
export class Portal {
  readonly portalId: number;
  private readonly grantedScopes: Set<string>;
  readonly domain: string;
  readonly tier: AccountTier;
  readonly apiLimitIncrease: boolean;
  readonly timeZone: string;
  otherAppsShare: number;
  private readonly random: Random;
  private readonly mutationRandom: Random;
  private readonly collections = new Map<ContentType, Collection>();
  private readonly rowsByTable = new Map<number, Collection>();
  private readonly nextId = new Map<ContentType, number>();
  private readonly seqByType = new Map<ContentType, number>();
  private lastWriteMs = SEED_NOW_MS;
  /** How far HubSpot's clock (update stamps, audit times, scheduled publishing) runs ahead of the machine's. */
  clockOffsetMs = 0;
  private refIds: { authorIds: number[]; tagIds: number[] } | null = null;

  constructor(options: PortalOptions) {
    this.portalId = options.portalId;
    this.grantedScopes = new Set(options.scopes ?? ['content', 'hubdb']);
    this.domain = `www.portal-${options.portalId}.example.com`;
    this.tier = options.tier ?? 'enterprise';
    this.apiLimitIncrease = options.apiLimitIncrease ?? false;
    this.timeZone = options.timeZone ?? 'US/Eastern';
    new Intl.DateTimeFormat('en-US', { timeZone: this.timeZone }); // throws RangeError for a zone that does not exist
    this.otherAppsShare = options.otherAppsShare ?? 0;
    const seed = options.seed ?? options.portalId;
    this.random = createRandom(seed);
    this.mutationRandom = createRandom(seed ^ 0x5bd1e995);
    for (const type of CONTENT_TYPES) {
      this.collections.set(type, new Collection());
      this.nextId.set(type, ID_BASE[type]);
      this.seqByType.set(type, 0);
    }
    const sizes = { ...SMALL_PORTAL_SIZES, ...options.sizes };
    const tables = options.hubdbTables ?? options.sizes?.hubdb_tables ?? 3;
    // Authors and tags first: posts reference their ids.
    const order: ContentType[] = ['blog_authors', 'blog_tags', 'site_pages', 'landing_pages', 'blog_posts', 'url_redirects'];
    for (const type of order) this.seed(type, sizes[type]);
    this.seed('hubdb_tables', tables);
    this.seed('hubdb_rows', tables > 0 ? sizes.hubdb_rows : 0);
    if (options.prerender) this.prerender();
  }

  /** Renders (caches) every item's wire JSON and its bytes; a changed item renders again when next served. */
  prerender(): void {
    for (const collection of this.collections.values()) for (const item of collection.items) itemBytes(item);
    for (const rows of this.rowsByTable.values()) for (const row of rows.items) itemBytes(row);
  }

  // Scopes of the portal's private-app token.
  get scopes(): ReadonlySet<string> {
    return this.grantedScopes;
  }

  // The private-app token loses a scope (its calls needing it answer 403 MISSING_SCOPES).
  removeScope(scope: string): void {
    this.grantedScopes.delete(scope);
  }

  // The collection for a type (HubDB rows live per table; this one is unused for rows).
  collection(type: ContentType): Collection {
    return this.collections.get(type)!;
  }

  // Non-archived HubDB table by numeric id or by name.
  findTable(idOrName: string): SimItem | undefined {
    return this.collection('hubdb_tables').items.find(
      (t) => !t.archived && (String(t.id) === idOrName || t.body['name'] === idOrName),
    );
  }

  // Rows collection of a table.
  tableRows(tableId: number): Collection {
    let rows = this.rowsByTable.get(tableId);
    if (!rows) {
      rows = new Collection();
      this.rowsByTable.set(tableId, rows);
    }
    return rows;
  }

  // Adds `count` new items (rows go round-robin over live tables); returns their keys.
  addItems(type: ContentType, count: number): string[] {
    const keys: string[] = [];
    for (let i = 0; i < count; i++) {
      const now = this.writeMs();
      const item = this.create(type, now, now, this.mutationRandom);
      if (item) {
        keys.push(this.keyOf(type, item));
        this.tableChanged(item, now);
      }
    }
    return keys;
  }

  // Archives `count` random live items (or the given ids/keys); returns the keys removed. HubSpot
  // moves deleted CMS content to the archive (`archived=true` lists it); archiving stamps the
  // item's update time too (an assumption the spec does not settle: docs/sync.md), and a
  // HubDB row's change stamps its table.
  deleteItems(type: ContentType, which: number | string[]): string[] {
    const chosen = this.choose(type, which);
    for (const item of chosen) {
      const now = this.writeMs();
      const collection = item.tableId === null ? this.collection(type) : this.tableRows(item.tableId);
      collection.archive(item);
      markArchived(type, item.body, now);
      item.body[updatedField(type)] = new Date(now).toISOString();
      this.tableChanged(item, now);
    }
    return chosen.map((item) => this.keyOf(type, item));
  }

  // Removes items for good (as a purge of HubSpot's archive, or a HubDB row deleted from a
  // published table): no listing shows them again, archived or not. Returns the keys.
  purgeItems(type: ContentType, which: number | string[]): string[] {
    const chosen = this.choose(type, which);
    for (const item of chosen) {
      const collection = item.tableId === null ? this.collection(type) : this.tableRows(item.tableId);
      collection.remove(item);
      this.tableChanged(item, this.writeMs());
    }
    return chosen.map((item) => this.keyOf(type, item));
  }

  // Bumps the updated timestamp of `count` random live items (or given ids/keys); returns keys.
  // `atMs` stamps them all with that one time instead (items sharing one updatedAt, or a write
  // whose stamp is older than its visibility, as a late-committing write would be).
  touchItems(type: ContentType, which: number | string[], atMs?: number): string[] {
    const chosen = this.choose(type, which);
    for (const item of chosen) {
      const now = atMs ?? this.writeMs();
      item.body[updatedField(type)] = new Date(now).toISOString();
      changed(item);
      this.tableChanged(item, now);
    }
    return chosen.map((item) => this.keyOf(type, item));
  }

  // Renames a HubDB table (its name and label) and publishes it: its updatedAt moves, its rows'
  // do not (HubSpot stamps a row only when the row itself changes). Returns the table's id.
  renameTable(idOrName: string, name: string): string {
    const table = this.findTable(idOrName);
    if (!table) throw new Error(`no live HubDB table ${idOrName}`);
    const iso = new Date(this.writeMs()).toISOString();
    table.body['name'] = name;
    table.body['label'] = name;
    table.body['updatedAt'] = iso;
    table.body['publishedAt'] = iso;
    changed(table);
    return String(table.id);
  }

  // HubSpot's clock now (the machine's, moved by clockOffsetMs).
  now(): number {
    return Date.now() + this.clockOffsetMs;
  }

  // The time of a new write: now (or `atMs`, a write due then), strictly after the previous write.
  writeMs(atMs = this.now()): number {
    const now = Math.max(atMs, this.lastWriteMs + 1);
    this.lastWriteMs = now;
    return now;
  }

  // An item by its wire id, or a HubDB row by its key (`${tableId}:${rowId}`) or id; archived ones only when `archived`.
  findItem(type: ContentType, idOrKey: string, archived = false): SimItem | undefined {
    if (type === 'hubdb_rows') {
      const [tableId, rowId] = idOrKey.includes(':') ? idOrKey.split(':') : [null, idOrKey];
      const tables = tableId === null ? this.collection('hubdb_tables').items : [this.collection('hubdb_tables').byId(Number(tableId))];
      for (const table of tables) {
        if (!table || table.archived) continue;
        const row = this.tableRows(table.id).byId(Number(rowId));
        if (row && row.archived === archived) return row;
      }
      return undefined;
    }
    if (!/^\d+$/.test(idOrKey)) return undefined;
    const item = this.collection(type).byId(Number(idOrKey));
    return item && item.archived === archived ? item : undefined;
  }

  // A HubDB row changed: its table was published anew (updatedAt and publishedAt move).
  tableChanged(item: SimItem, nowMs: number): void {
    if (item.tableId === null) return;
    const table = this.collection('hubdb_tables').items.find((t) => t.id === item.tableId);
    if (!table) return;
    const iso = new Date(Math.max(nowMs, Date.parse(String(table.body['updatedAt'])))).toISOString();
    table.body['updatedAt'] = iso;
    table.body['publishedAt'] = iso;
    changed(table);
  }

  // Current live items of a type, in the order the API pages them.
  items(type: ContentType): ItemSummary[] {
    return this.liveItems(type).map((item) => ({
      id: String(item.id),
      key: this.keyOf(type, item),
      updatedAt: String(item.body[updatedField(type)]),
      ...(item.tableId === null ? {} : { tableId: String(item.tableId) }),
    }));
  }

  private liveItems(type: ContentType): SimItem[] {
    if (type !== 'hubdb_rows') return this.collection(type).active();
    return this.collection('hubdb_tables').active().flatMap((t) => this.tableRows(t.id).active());
  }

  keyOf(type: ContentType, item: SimItem): string {
    return type === 'hubdb_rows' ? `${item.tableId}:${item.id}` : String(item.id);
  }

  private choose(type: ContentType, which: number | string[]): SimItem[] {
    const live = this.liveItems(type);
    if (Array.isArray(which)) {
      const wanted = new Set(which);
      return live.filter((item) => wanted.has(String(item.id)) || wanted.has(this.keyOf(type, item)));
    }
    const pool = [...live];
    const chosen: SimItem[] = [];
    while (chosen.length < which && pool.length > 0) {
      const index = Math.floor(this.mutationRandom() * pool.length);
      chosen.push(pool.splice(index, 1)[0]!);
    }
    return chosen;
  }

  private seed(type: ContentType, count: number): void {
    const span = SEED_NOW_MS - START_MS - 200 * 86_400_000;
    for (let i = 0; i < count; i++) {
      const createdMs = START_MS + Math.floor((i * span) / Math.max(1, count)) + randomInt(this.random, 0, 3_600_000);
      const updatedMs = Math.min(SEED_NOW_MS, createdMs + randomInt(this.random, 0, 180 * 86_400_000));
      const item = this.create(type, createdMs, updatedMs, this.random);
      // A table was last published no earlier than its newest row (as when it is changed later).
      if (item && type === 'hubdb_rows') this.tableChanged(item, updatedMs);
    }
  }

  private create(type: ContentType, createdMs: number, updatedMs: number, random: Random): SimItem | null {
    const id = this.nextId.get(type)! + randomInt(random, 1, 4);
    const seq = this.seqByType.get(type)!;
    let tableId: number | null = null;
    if (type === 'hubdb_rows') {
      const tables = this.collection('hubdb_tables').active();
      if (tables.length === 0) return null;
      tableId = tables[seq % tables.length]!.id;
    }
    this.nextId.set(type, id);
    this.seqByType.set(type, seq + 1);
    this.refIds ??= {
      authorIds: this.collection('blog_authors').items.map((a) => a.id),
      tagIds: this.collection('blog_tags').items.map((t) => t.id),
    };
    const ctx: GenContext = { random, portalId: this.portalId, domain: this.domain, ...this.refIds };
    const body = BUILDERS[type](ctx, { seq, id, createdMs, updatedMs });
    const item: SimItem = { id, archived: false, tableId, body, json: null, bytes: null };
    (tableId === null ? this.collection(type) : this.tableRows(tableId)).push(item);
    if (type === 'blog_authors' || type === 'blog_tags') this.refIds = null;
    return item;
  }
}

// Sets the archive markers HubSpot shows on deleted content.
function markArchived(type: ContentType, body: Body, nowMs: number): void {
  const iso = new Date(nowMs).toISOString();
  if (type === 'site_pages' || type === 'landing_pages') Object.assign(body, { archivedAt: iso, archivedInDashboard: true });
  else if (type === 'blog_posts') Object.assign(body, { archivedAt: nowMs, archivedInDashboard: true });
  else if (type === 'blog_authors' || type === 'blog_tags') body['deletedAt'] = iso;
  else if (type === 'hubdb_tables') Object.assign(body, { deleted: true, deletedAt: iso });
}
