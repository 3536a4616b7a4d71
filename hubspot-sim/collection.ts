// An id-ordered list of simulator items with HubSpot-style cursor paging over it.

export type Body = Record<string, unknown>;

export interface SimItem {
  id: number;
  archived: boolean;
  tableId: number | null; // HubDB rows only
  body: Body;
  json: string | null; // cached wire JSON, reset whenever body changes (changed())
  bytes: Buffer | null; // the same JSON encoded as UTF-8, cached with it
}

export interface PageSlice {
  results: SimItem[];
  lastId: number | null; // id to continue after when there are more results, else null
}

// Wire JSON of an item, cached until the item changes.
export function itemJson(item: SimItem): string {
  if (item.json === null) item.json = JSON.stringify(item.body);
  return item.json;
}

// The wire JSON as UTF-8 bytes, cached with it: a page is then copied together, never encoded.
export function itemBytes(item: SimItem): Buffer {
  if (item.bytes === null || item.json === null) item.bytes = Buffer.from(itemJson(item), 'utf8');
  return item.bytes;
}

// Drops an item's cached wire forms after its body changed.
export function changed(item: SimItem): void {
  item.json = null;
  item.bytes = null;
}

/** Items of one type (or one HubDB table's rows), sorted by id. */
export class Collection {
  readonly items: SimItem[] = [];
  private archivedCount = 0;

  // Appends an item; ids must grow so the list stays sorted.
  push(item: SimItem): void {
    const last = this.items[this.items.length - 1];
    if (last && last.id >= item.id) throw new Error(`ids must increase (${item.id} after ${last.id})`);
    this.items.push(item);
    if (item.archived) this.archivedCount++;
  }

  // Number of items with the given archived flag.
  count(archived: boolean): number {
    return archived ? this.archivedCount : this.items.length - this.archivedCount;
  }

  // Flags an item archived (HubSpot deletes CMS content into the archive, ids stay stable).
  archive(item: SimItem): void {
    if (item.archived) return;
    item.archived = true;
    changed(item);
    this.archivedCount++;
  }

  // Removes an item for good (ids of the others stay in order).
  remove(item: SimItem): void {
    const index = this.items.indexOf(item);
    if (index < 0) return;
    this.items.splice(index, 1);
    if (item.archived) this.archivedCount--;
  }

  // Items matching `archived`, in id order.
  active(archived = false): SimItem[] {
    return this.items.filter((i) => i.archived === archived);
  }

  // Up to `limit` items with id > afterId; stable under inserts/deletes because it keys on ids.
  page(afterId: number | null, limit: number, archived: boolean): PageSlice {
    let index = afterId === null ? 0 : this.firstIndexAfter(afterId);
    const results: SimItem[] = [];
    const items = this.items;
    while (index < items.length && results.length < limit) {
      const item = items[index++]!;
      if (item.archived === archived) results.push(item);
    }
    let more = false;
    for (; index < items.length; index++) {
      if (items[index]!.archived === archived) {
        more = true;
        break;
      }
    }
    const last = results[results.length - 1];
    return { results, lastId: more && last ? last.id : null };
  }

  // The item with this id (archived or not), by binary search.
  byId(id: number): SimItem | undefined {
    const item = this.items[this.firstIndexAfter(id - 1)];
    return item?.id === id ? item : undefined;
  }

  // Binary search: index of the first item whose id is greater than afterId.
  private firstIndexAfter(afterId: number): number {
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.items[mid]!.id <= afterId) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
