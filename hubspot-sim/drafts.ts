// Page and post drafts, push-live, scheduled publishing and revisions
// (GET/PATCH …/{objectId}/draft, POST …/draft/push-live, POST …/schedule,
// GET …/{objectId}/revisions, POST …/revisions/{revisionId}/restore).
//
// The live item is what lists and batch reads return; a draft exists once it
// is edited (until then GET …/draft answers the live item). Editing a draft
// stamps the draft, not the live item; push-live and a schedule's time publish
// it (live = draft, PUBLISHED, a new update time and revision). A scheduled
// publish happens at the first request to the portal (or test hook) at or
// after its publishDate by HubSpot's clock, stamped at publishDate unless a
// later write came first: deterministic, and no timer.

import type { VersionedContentType } from '../shared/hubspot/write-endpoints.ts';
import type { Body, SimItem } from './collection.ts';
import { badRequest, invalidField, json, noContent, notFound, type SimResponse } from './responses.ts';
import { checkFields, isObject, typeProblem } from './write-validation.ts';
import { setFields, type WriteContext } from './write-state.ts';

function itemOf(ctx: WriteContext, type: VersionedContentType): SimItem | undefined {
  return ctx.portal.findItem(type, ctx.params['objectId'] ?? '');
}

function missing(ctx: WriteContext): SimResponse {
  return notFound(`No object with id ${ctx.params['objectId']}`);
}

/** The draft of an item: its own copy once edited, else the live item's. */
export function draftOf(ctx: WriteContext, type: VersionedContentType, item: SimItem): Body {
  return ctx.state.drafts.get(ctx.state.key(type, item)) ?? item.body;
}

// The draft to edit (a copy of the live item the first time).
function editableDraft(ctx: WriteContext, type: VersionedContentType, item: SimItem): Body {
  const key = ctx.state.key(type, item);
  let draft = ctx.state.drafts.get(key);
  if (!draft) ctx.state.drafts.set(key, (draft = structuredClone(item.body)));
  return draft;
}

/** GET …/{objectId}/draft. */
export function draftRead(ctx: WriteContext, type: VersionedContentType): SimResponse {
  const item = itemOf(ctx, type);
  if (!item) return missing(ctx);
  return ctx.read([item], () => json(200, draftOf(ctx, type, item)));
}

/** PATCH …/{objectId}/draft: a sparse update of the draft; the draft's update time moves, the live item's does not. */
export function draftUpdate(ctx: WriteContext, type: VersionedContentType): SimResponse {
  const item = itemOf(ctx, type);
  if (!item) return missing(ctx);
  if (!isObject(ctx.body)) return badRequest(`Invalid input JSON: expected a ${type === 'blog_posts' ? 'BlogPost' : 'Page'} object`);
  const checked = checkFields(type, ctx.body);
  if (!checked.ok) return invalidField(checked.problem.message, checked.problem.field, checked.problem.code);
  const draft = editableDraft(ctx, type, item);
  const stamp = ctx.portal.writeMs();
  setFields(draft, checked.fields);
  Object.assign(draft, { updated: new Date(stamp).toISOString(), updatedById: ctx.user.id });
  ctx.state.logEvent(type, 'UPDATED', String(item.id), String(draft['name'] ?? ''), ctx.user, stamp, { version: 'draft' });
  ctx.state.countWrite(type, item, ctx.endpoint);
  return json(200, draft);
}

/** POST …/{objectId}/draft/push-live: the draft goes live (204). */
export function pushLive(ctx: WriteContext, type: VersionedContentType): SimResponse {
  const item = itemOf(ctx, type);
  if (!item) return missing(ctx);
  ctx.state.publishDraft(type, item, ctx.user, ctx.endpoint);
  return noContent();
}

/** POST …/schedule `{id, publishDate}` (ContentScheduleRequestVNext): the draft, SCHEDULED, goes live at publishDate (204). */
export function schedule(ctx: WriteContext, type: VersionedContentType): SimResponse {
  if (!isObject(ctx.body)) return badRequest('Invalid input JSON: expected a ContentScheduleRequestVNext object');
  for (const [field, fieldType] of [['id', 'string'], ['publishDate', 'date-time']] as const) {
    const value = ctx.body[field];
    if (value === undefined) return invalidField(`Missing required creator property '${field}' (through reference chain: ContentScheduleRequestVNext["${field}"])`, field, 'REQUIRED');
    const problem = typeProblem(value, fieldType);
    if (problem !== null) return invalidField(`Cannot deserialize value of type \`${problem}\` (through reference chain: ContentScheduleRequestVNext["${field}"])`, field, 'INVALID_TYPE');
  }
  const id = String(ctx.body['id']);
  const item = ctx.portal.findItem(type, id);
  if (!item) return notFound(`No object with id ${id}`);
  const publishDate = new Date(Date.parse(String(ctx.body['publishDate']))).toISOString();
  const draft = editableDraft(ctx, type, item);
  const stamp = ctx.portal.writeMs();
  Object.assign(draft, { publishDate, state: 'SCHEDULED', currentState: 'SCHEDULED', updated: new Date(stamp).toISOString(), updatedById: ctx.user.id });
  ctx.state.schedule(type, item, Date.parse(publishDate), ctx.user);
  ctx.state.logEvent(type, 'UPDATED', String(item.id), String(draft['name'] ?? ''), ctx.user, stamp, { version: 'draft', publishDate });
  ctx.state.countWrite(type, item, ctx.endpoint);
  return noContent();
}

/** GET …/{objectId}/revisions (newest first). */
export function revisionsList(ctx: WriteContext, type: VersionedContentType): SimResponse {
  const item = itemOf(ctx, type);
  if (!item) return missing(ctx);
  const list = ctx.state.revisions.of(ctx.state.key(type, item), item, ctx.state.creator);
  return ctx.state.revisions.page(list, ctx.query, ctx.pathname, ctx.baseUrl);
}

/** POST …/{objectId}/revisions/{revisionId}/restore: the live item becomes that revision's (a new write; answers the item). */
export function restore(ctx: WriteContext, type: VersionedContentType): SimResponse {
  const item = itemOf(ctx, type);
  if (!item) return missing(ctx);
  const list = ctx.state.revisions.of(ctx.state.key(type, item), item, ctx.state.creator);
  const revision = list.find((r) => r.id === ctx.params['revisionId']);
  if (!revision) return notFound(`No revision ${ctx.params['revisionId']} of object ${item.id}`);
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(revision.object)) if (!RESTORE_KEEPS.has(k)) fields[k] = v;
  ctx.state.applyLive(type, item, fields, ctx.user, 'RESTORE', ctx.endpoint);
  return json(200, item.body);
}

/** Fields a restore leaves as they are (HubSpot's stamps of the item itself). */
const RESTORE_KEEPS = new Set(['id', 'created', 'updated', 'createdById', 'updatedById', 'archivedAt']);
