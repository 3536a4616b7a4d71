// What one batch of a plan, publish or restore job asks of HubSpot, per
// content type (docs/publish.md): the read (a plan's read, an apply's re-read)
// and the write, each answered as the text the holder calls take
// (shared/sql/publish.ts), so Postgres parses the items, not the worker.
//
// - Site and landing pages, blog posts, authors, tags: one `batch/read`, one
//   `batch/update` (HubSpot's own answer, 200 / 207 / a 4xx refusal). Pages and
//   posts in mode `draft`: each item's draft PATCHed and pushed live, then one
//   `batch/read` of the live items; mode `schedule`: each draft PATCHed and
//   scheduled, the drafts' answers recorded.
// - HubDB rows: per table one published-rows `batch/read`; the write is one
//   draft `batch/update` per table, one publish per table, then one read of
//   the published rows (their update time is the publish's, not the draft's).
// - URL redirects: one GET and one PATCH each (HubSpot has no batch for them).
//
// Answers assembled from several requests are a JSON array of batch answers,
// or `{"results":[…],"errors":[…],"pending":[…]}`, joined as text; a refusal
// of one item becomes an error naming it (`context.ids`). An item whose
// write's outcome is unknown (a 5xx, a timeout, a dropped connection) is left
// out of the results: it stays `writing`, and the next re-read decides; when
// its write's first step was answered (a draft PATCHed, HubDB draft rows),
// that answer goes in `pending`, so the re-read recognises the values HubSpot
// stored (a value it normalised). A restore of a scheduled item not live yet
// writes its draft (`ItemToWrite.draft`).
import type { ContentType } from '../../shared/content-types.ts';
import { BATCH_LIMIT, VERSIONED_CONTENT_TYPES, type BatchContentType, type VersionedContentType } from '../../shared/hubspot/write-endpoints.ts';
import { WriteOutcomeUnknown, type HubSpotAnswer, type HubSpotWriteClient, type WriteInput } from '../../shared/hubspot/writes.ts';
import { HubSpotTransientError } from '../../shared/hubspot/errors.ts';
import type { ItemToWrite, PublishMode } from '../../shared/sql/publish.ts';

/** How pages and posts are written (the plan's mode; every other type, and a restore, writes `live`). */
export interface WriteMode {
  mode: PublishMode;
  /** Mode `schedule`: when HubSpot publishes. */
  publishAt: Date | null;
}

export const LIVE: WriteMode = { mode: 'live', publishAt: null };

/** Items written one request at a time go in batches this small: their re-read and write stay close together. */
const ONE_BY_ONE_BATCH = 10;
/** Requests of one batch sent at once when HubSpot takes items one by one. */
const CONCURRENCY = 8;

export const isVersioned = (type: ContentType): type is VersionedContentType => (VERSIONED_CONTENT_TYPES as readonly string[]).includes(type);

/** Items per batch: HubSpot's batch limit; for writes made one item at a time (redirects, drafts), a group of ten. */
export function batchSize(type: ContentType, writing: WriteMode | null): number {
  if (!writing) return BATCH_LIMIT;
  if (type === 'url_redirects' || (isVersioned(type) && writing.mode !== 'live')) return ONE_BY_ONE_BATCH;
  return BATCH_LIMIT;
}

/** HubDB rows by table: `<tableId>:<rowId>` ids grouped, in first-seen order. */
function byTable<T extends { hubspotId: string }>(items: readonly T[]): Map<string, { rowId: string; item: T }[]> {
  const tables = new Map<string, { rowId: string; item: T }[]>();
  for (const item of items) {
    const [tableId, rowId] = item.hubspotId.split(':');
    if (!tableId || !rowId) throw new Error(`not a HubDB row id: ${item.hubspotId}`);
    let rows = tables.get(tableId);
    if (!rows) tables.set(tableId, (rows = []));
    rows.push({ rowId, item });
  }
  return tables;
}

/** Runs `fn` over `items`, `limit` at a time; after the first failure no more start, and it is thrown once all started ones end. */
async function eachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | null = null;
  const lane = async () => {
    while (failure === null && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failure) throw (failure as { error: unknown }).error;
}

/**
 * The items as HubSpot has them now (`hubspotId`s as stored): `body`, the text
 * record_plan_batch and the prepare calls take, and `readAt`, HubSpot's time
 * of the read when its answers carry no `startedAt` (redirects: the earliest
 * Date header of their GETs), else null.
 */
export async function readItems(
  hs: HubSpotWriteClient, type: ContentType, hubspotIds: readonly string[], signal: AbortSignal,
): Promise<{ body: string; readAt: Date | null }> {
  if (type === 'hubdb_rows') {
    const bodies: string[] = [];
    for (const [tableId, rows] of byTable(hubspotIds.map((hubspotId) => ({ hubspotId })))) {
      bodies.push(await hs.rowsBatchRead(tableId, rows.map((r) => r.rowId), signal) ?? '{"results":[]}');
    }
    return { body: bodies.length === 1 ? bodies[0]! : `[${bodies.join(',')}]`, readAt: null };
  }
  if (type === 'url_redirects') {
    const found: string[] = [];
    let readAt: Date | null = null;
    await eachLimited(hubspotIds, CONCURRENCY, async (id) => {
      const read = await hs.getRedirect(id, signal);
      if (read === null) return;
      found.push(read.body);
      if (read.date && (readAt === null || read.date < readAt)) readAt = read.date;
    });
    return { body: `{"results":[${found.join(',')}]}`, readAt };
  }
  if (type === 'hubdb_tables') throw new Error('HubDB tables are not editable');
  return { body: await hs.batchRead(type as BatchContentType, hubspotIds, signal), readAt: null };
}

/**
 * What a write came to: HubSpot's answer (null: nothing known, nothing to
 * record), how many items' outcome is unknown, and a failure that stopped it
 * part way (a daily limit, a wait past the deadline), thrown once the known
 * answers are recorded.
 */
export interface WriteResult {
  answer: HubSpotAnswer | null;
  unknown: number;
  stoppedBy: unknown;
}

/** An error naming one item, as a batch answer's `errors` hold them, from HubSpot's refusal of its request. */
function itemError(objectId: string, refusal: HubSpotAnswer, what: string): Record<string, unknown> {
  let body: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(refusal.body) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    // not JSON: the status says it
  }
  const message = typeof body['message'] === 'string' ? body['message'] : `HubSpot answered HTTP ${refusal.status} to ${what}`;
  return { status: 'error', category: body['category'] ?? `HTTP_${refusal.status}`, message, context: { ids: [objectId] }, httpStatus: refusal.status };
}

/** An assembled answer: batch answers (as text), the errors naming single items, and the first steps' answers of unknown writes. */
function assembled(answers: readonly string[], errors: readonly Record<string, unknown>[], pending: readonly string[] = []): HubSpotAnswer {
  const parts = [...answers];
  if (errors.length > 0 || parts.length === 0) parts.push(JSON.stringify({ results: [], errors }));
  if (pending.length > 0) parts.push(`{"results":[],"pending":[${pending.join(',')}]}`);
  return { status: errors.length > 0 ? 207 : 200, body: parts.length === 1 ? parts[0]! : `[${parts.join(',')}]` };
}

/**
 * Writes the items' fields (the targets, or a restore's values) as `writing`
 * says for the type; never sends one item twice. Every thrown error but a
 * WriteOutcomeUnknown means the items were not all sent: see WriteResult.
 */
export async function writeItems(
  hs: HubSpotWriteClient, type: ContentType, writes: readonly ItemToWrite[], writing: WriteMode, signal: AbortSignal,
): Promise<WriteResult> {
  if (type === 'hubdb_rows') return writeRows(hs, writes, signal);
  if (isVersioned(type) && writes.some((w) => w.draft)) return writeLiveAndDrafts(hs, type, writes, writing, signal);
  if (type === 'url_redirects') {
    return oneByOne(writes, async (w, out) => {
      const answer = await hs.patchRedirect(w.hubspotId, w.fields, signal);
      if (answer.status < 300) out.results.push(answer.body);
      else out.errors.push(itemError(w.hubspotId, answer, 'the redirect PATCH'));
    });
  }
  if (isVersioned(type) && writing.mode !== 'live') return writeDrafts(hs, type, writes, writing, signal);
  if (type === 'hubdb_tables') throw new Error('HubDB tables are not editable');
  const inputs: WriteInput[] = writes.map((w) => ({ ...w.fields, id: w.hubspotId }));
  try {
    return { answer: await hs.batchUpdate(type as BatchContentType, inputs, signal), unknown: 0, stoppedBy: null };
  } catch (e) {
    if (e instanceof WriteOutcomeUnknown) return { answer: null, unknown: writes.length, stoppedBy: null };
    throw e; // not sent (a 429 that outlasted its waits, the deadline, a refused token)
  }
}

interface Collected {
  results: string[];
  errors: Record<string, unknown>[];
  /** The first step's answers of writes whose last step's outcome is unknown. */
  pending: string[];
  unknown: number;
}

// Items written one request (or two) at a time: each item's answer, error or unknown outcome collected.
async function oneByOne(
  writes: readonly ItemToWrite[], one: (w: ItemToWrite, out: Collected) => Promise<void>,
): Promise<WriteResult> {
  const out: Collected = { results: [], errors: [], pending: [], unknown: 0 };
  let stoppedBy: unknown = null;
  try {
    await eachLimited(writes, CONCURRENCY, async (w) => {
      try {
        await one(w, out);
      } catch (e) {
        if (!(e instanceof WriteOutcomeUnknown)) throw e;
        out.unknown++;
      }
    });
  } catch (e) {
    stoppedBy = e;
  }
  const known = out.results.length + out.errors.length + out.pending.length;
  return {
    answer: known === 0 ? null : assembled([`{"results":[${out.results.join(',')}]}`], out.errors, out.pending), unknown: out.unknown, stoppedBy,
  };
}

// Pages and posts written through their drafts: PATCH the draft, then push it live (read back after) or schedule it.
async function writeDrafts(
  hs: HubSpotWriteClient, type: VersionedContentType, writes: readonly ItemToWrite[], writing: WriteMode, signal: AbortSignal,
): Promise<WriteResult> {
  const live = new Map<string, string>(); // pushed live: id → its draft's answer
  const result = await oneByOne(writes, async (w, out) => {
    const draft = await hs.patchDraft(type, w.hubspotId, w.fields, signal);
    if (draft.status >= 300) return void out.errors.push(itemError(w.hubspotId, draft, 'the draft PATCH'));
    try {
      if (writing.mode === 'schedule') {
        const scheduled = await hs.schedule(type, w.hubspotId, writing.publishAt!, signal);
        if (scheduled.status >= 300) return void out.errors.push(itemError(w.hubspotId, scheduled, 'the schedule request'));
        return void out.results.push(draft.body);
      }
      const pushed = await hs.pushLive(type, w.hubspotId, signal);
      if (pushed.status >= 300) return void out.errors.push(itemError(w.hubspotId, pushed, 'push-live'));
    } catch (e) {
      if (e instanceof WriteOutcomeUnknown) out.pending.push(draft.body); // its draft's values, for the next re-read
      throw e;
    }
    live.set(w.hubspotId, draft.body);
  });
  if (writing.mode === 'schedule' || live.size === 0) return result;
  // Pushed live: HubSpot's answer is 204; the live items (their new update time) are read back.
  const { errors, pending } = result.answer ? partsOf(result.answer) : { errors: [], pending: [] };
  try {
    const readBack = await hs.batchRead(type, [...live.keys()], signal);
    return { answer: assembled([readBack], errors, pending), unknown: result.unknown, stoppedBy: result.stoppedBy };
  } catch (e) {
    // Pushed live, not read back: the next re-read sees them (their drafts' answers kept).
    const stoppedBy = result.stoppedBy ?? (e instanceof HubSpotTransientError ? null : e);
    return { answer: assembled([], errors, [...pending, ...live.values()]), unknown: result.unknown + live.size, stoppedBy };
  }
}

// A restore that writes some items live (batch/update) and scheduled ones' drafts back (PATCH each): both answers in one.
async function writeLiveAndDrafts(
  hs: HubSpotWriteClient, type: VersionedContentType, writes: readonly ItemToWrite[], writing: WriteMode, signal: AbortSignal,
): Promise<WriteResult> {
  const live = writes.filter((w) => !w.draft);
  const answers: string[] = [];
  const errors: Record<string, unknown>[] = [];
  let unknown = 0;
  if (live.length > 0) {
    const result = await writeItems(hs, type, live, writing, signal); // throws when not sent: nothing of the batch was
    if (result.answer && result.answer.status >= 300) {
      errors.push(...live.map((w) => itemError(w.hubspotId, result.answer!, 'the batch update')));
    } else if (result.answer) {
      answers.push(result.answer.body);
    }
    unknown += result.unknown;
  }
  const drafts = await oneByOne(writes.filter((w) => w.draft), async (w, out) => {
    const draft = await hs.patchDraft(type, w.hubspotId, w.fields, signal);
    if (draft.status >= 300) out.errors.push(itemError(w.hubspotId, draft, 'the draft PATCH'));
    else out.results.push(draft.body);
  });
  if (drafts.answer) answers.push(drafts.answer.body);
  const known = answers.length + errors.length;
  return { answer: known === 0 ? null : assembled(answers, errors), unknown: unknown + drafts.unknown, stoppedBy: drafts.stoppedBy };
}

// The errors and pending answers of an answer `assembled` made (small: parsed here), each pending one as text again.
function partsOf(answer: HubSpotAnswer): { errors: Record<string, unknown>[]; pending: string[] } {
  const parsed = JSON.parse(answer.body) as unknown;
  const parts = (Array.isArray(parsed) ? parsed : [parsed]) as { errors?: Record<string, unknown>[]; pending?: unknown[] }[];
  return {
    errors: parts.flatMap((p) => p.errors ?? []),
    pending: parts.flatMap((p) => p.pending ?? []).map((d) => JSON.stringify(d)),
  };
}

// HubDB rows: per table, the drafts updated, the table published, the published rows read back.
async function writeRows(hs: HubSpotWriteClient, writes: readonly ItemToWrite[], signal: AbortSignal): Promise<WriteResult> {
  const answers: string[] = [];
  const errors: Record<string, unknown>[] = [];
  const pending: string[] = [];
  let unknown = 0;
  let stoppedBy: unknown = null;
  for (const [tableId, rows] of byTable(writes)) {
    if (stoppedBy !== null) break;
    let drafts: unknown[] = []; // the drafted rows' answers, kept when what follows them is unknown
    try {
      const inputs: WriteInput[] = rows.map((r) => ({ ...r.item.fields, id: r.rowId }));
      const draft = await hs.rowsDraftBatchUpdate(tableId, inputs, signal);
      if (draft.status >= 300) {
        errors.push(...rows.map((r) => itemError(r.rowId, draft, 'the draft rows update')));
        continue;
      }
      // The drafts' answer names the rows it refused; the rest are published (the table's rows are few: parsed here).
      const parsed = JSON.parse(draft.body) as { results?: { id?: unknown }[]; errors?: Record<string, unknown>[] };
      errors.push(...(parsed.errors ?? []));
      drafts = parsed.results ?? [];
      const drafted = (parsed.results ?? []).map((r) => String(r.id));
      if (drafted.length === 0) continue;
      const published = await hs.publishTable(tableId, signal);
      if (published.status >= 300) {
        errors.push(...drafted.map((id) => itemError(id, published, 'the table publish (the rows stay in its draft)')));
        continue;
      }
      try {
        answers.push(await hs.rowsBatchRead(tableId, drafted, signal) ?? '{"results":[]}');
      } catch (e) {
        if (!(e instanceof HubSpotTransientError)) throw e;
        unknown += drafted.length; // published, answer not read: the next re-read sees them
        pending.push(...drafts.map((d) => JSON.stringify(d)));
      }
    } catch (e) {
      if (!(e instanceof WriteOutcomeUnknown)) stoppedBy = e;
      else {
        unknown += rows.length;
        pending.push(...drafts.map((d) => JSON.stringify(d))); // drafted, the publish unknown
      }
    }
  }
  const known = answers.length + errors.length + pending.length;
  return { answer: known === 0 ? null : assembled(answers, errors, pending), unknown, stoppedBy };
}
