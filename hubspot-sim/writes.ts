// Batch read and batch update of site pages, landing pages, blog posts, authors
// and tags, and one URL redirect's GET and PATCH, as HubSpot's v3 specs publish
// them (schema-facts-writes.ts): 200, or 207 with an error per failed input.

import { BATCH_LIMIT, type BatchContentType } from '../shared/hubspot/write-endpoints.ts';
import { itemJson, type SimItem } from './collection.ts';
import {
  badRequest, batchAnswer, inputInvalid, inputNotFound, invalidField, json, notFound, type SimResponse, type StandardError,
} from './responses.ts';
import { checkFields, isObject } from './write-validation.ts';
import type { WriteContext } from './write-state.ts';

/** A whole request refused (400), or the batch's inputs. */
type Parsed<T> = { ok: true; inputs: T[] } | { ok: false; response: SimResponse };

/** BatchInputString: `{"inputs": ["<id>", …]}`, at most BATCH_LIMIT, each id once. */
export function parseIdInputs(body: unknown): Parsed<string> {
  const inputs = inputsOf(body, 'BatchInputString');
  if (!inputs.ok) return inputs;
  const index = inputs.inputs.findIndex((v) => typeof v !== 'string');
  if (index >= 0) {
    return refuse(`Cannot deserialize value of type \`java.lang.String\` from ${describe(inputs.inputs[index])} (through reference chain: BatchInputString["inputs"]->java.util.ArrayList[${index}])`);
  }
  return { ok: true, inputs: [...new Set(inputs.inputs as string[])] };
}

/** BatchInputJsonNode: `{"inputs": [{…}, …]}`, at most BATCH_LIMIT, no id twice. */
export function parseObjectInputs(body: unknown, schema: string): Parsed<Record<string, unknown>> {
  const inputs = inputsOf(body, schema);
  if (!inputs.ok) return inputs;
  const index = inputs.inputs.findIndex((v) => !isObject(v));
  if (index >= 0) {
    return refuse(`Cannot deserialize value of type \`java.util.Map\` from ${describe(inputs.inputs[index])} (through reference chain: ${schema}["inputs"]->java.util.ArrayList[${index}])`);
  }
  const objects = inputs.inputs as Record<string, unknown>[];
  const seen = new Set<string>();
  const duplicates = new Set<string>();
  for (const input of objects) {
    if (typeof input['id'] !== 'string') continue;
    if (seen.has(input['id'])) duplicates.add(input['id']);
    seen.add(input['id']);
  }
  if (duplicates.size > 0) return refuse(`Duplicate IDs found in batch input: [${[...duplicates].join(', ')}]. IDs must be unique`);
  return { ok: true, inputs: objects };
}

function inputsOf(body: unknown, schema: string): Parsed<unknown> {
  if (!isObject(body)) return refuse(`Invalid input JSON: expected a ${schema} object`);
  const inputs = body['inputs'];
  if (inputs === undefined) return refuse(`Missing required creator property 'inputs' (through reference chain: ${schema}["inputs"])`);
  if (!Array.isArray(inputs)) return refuse(`Cannot deserialize value of type \`java.util.ArrayList\` from ${describe(inputs)} (through reference chain: ${schema}["inputs"])`);
  if (inputs.length > BATCH_LIMIT) return refuse(`Batch size of ${inputs.length} exceeds the limit of ${BATCH_LIMIT} inputs`);
  return { ok: true, inputs };
}

function refuse(message: string): { ok: false; response: SimResponse } {
  return { ok: false, response: badRequest(message) };
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'Array value';
  return typeof value === 'object' ? 'Object value' : `${typeof value === 'string' ? 'String' : typeof value === 'number' ? 'Number' : 'Boolean'} value`;
}

/** `archived=true`: the request reads or updates deleted items (the spec: "Defaults to `false`"). */
export function archivedOf(query: URLSearchParams): boolean {
  return query.get('archived') === 'true';
}

/** POST …/batch/read: each id's item (live, or archived with `archived=true`); an unknown id is an error of its own. */
export function batchRead(ctx: WriteContext, type: BatchContentType): SimResponse {
  const started = ctx.portal.now();
  const parsed = parseIdInputs(ctx.body);
  if (!parsed.ok) return parsed.response;
  const archived = archivedOf(ctx.query);
  const found: SimItem[] = [];
  const errors: StandardError[] = [];
  for (const id of parsed.inputs) {
    const item = ctx.portal.findItem(type, id, archived);
    if (item) found.push(item);
    else errors.push(inputNotFound(id));
  }
  return ctx.read(found, () => batchAnswer(started, ctx.portal.now(), found.map(itemJson), errors));
}

/**
 * POST …/batch/update: each input a sparse update of the item its `id` names.
 * Each is its own write (its own update time, revision and audit event); an
 * unknown id or a refused field fails that input alone.
 */
export function batchUpdate(ctx: WriteContext, type: BatchContentType): SimResponse {
  const started = ctx.portal.now();
  const parsed = parseObjectInputs(ctx.body, 'BatchInputJsonNode');
  if (!parsed.ok) return parsed.response;
  const archived = archivedOf(ctx.query);
  const results: string[] = [];
  const errors: StandardError[] = [];
  for (const input of parsed.inputs) {
    const id = input['id'];
    if (typeof id !== 'string') {
      errors.push(inputInvalid(String(id ?? ''), { field: 'id', code: 'REQUIRED', message: 'Each input needs the id of the object to update' }));
      continue;
    }
    const item = ctx.portal.findItem(type, id, archived);
    if (!item) {
      errors.push(inputNotFound(id));
      continue;
    }
    const checked = checkFields(type, input);
    if (!checked.ok) {
      errors.push(inputInvalid(id, checked.problem));
      continue;
    }
    ctx.state.applyLive(type, item, checked.fields, ctx.user, 'UPDATED', ctx.endpoint);
    results.push(itemJson(item));
  }
  return batchAnswer(started, ctx.portal.now(), results, errors);
}

const REDIRECT_STYLES = [301, 302, 305];

/** GET /cms/url-redirects/<version>/{urlRedirectId}. */
export function redirectRead(ctx: WriteContext): SimResponse {
  const item = ctx.portal.findItem('url_redirects', ctx.params['urlRedirectId'] ?? '');
  if (!item) return notFound(`No URL redirect with id ${ctx.params['urlRedirectId']}`);
  return ctx.read([item], () => json(200, item.body));
}

/** PATCH /cms/url-redirects/<version>/{urlRedirectId}: the fields given change (redirectStyle 301, 302 or 305). */
export function redirectUpdate(ctx: WriteContext): SimResponse {
  const item = ctx.portal.findItem('url_redirects', ctx.params['urlRedirectId'] ?? '');
  if (!item) return notFound(`No URL redirect with id ${ctx.params['urlRedirectId']}`);
  if (!isObject(ctx.body)) return badRequest('Invalid input JSON: expected a UrlMapping object');
  const checked = checkFields('url_redirects', ctx.body);
  if (!checked.ok) return invalidField(checked.problem.message, checked.problem.field, checked.problem.code);
  const style = checked.fields['redirectStyle'];
  if (style !== undefined && !REDIRECT_STYLES.includes(style as number)) {
    return invalidField(`redirectStyle must be one of ${REDIRECT_STYLES.join(', ')} (got ${String(style)})`, 'redirectStyle', 'INVALID_VALUE');
  }
  ctx.state.applyLive('url_redirects', item, checked.fields, ctx.user, 'UPDATED', ctx.endpoint);
  return json(200, item.body);
}
