// The write side's routes, matched from the shared table of paths (the
// endpoints routes.ts serves), and the dispatch to their handlers.

import { isWriteEndpoint, type BatchContentType, type VersionedContentType, type WriteEndpoint } from '../shared/hubspot/write-endpoints.ts';
import { draftRead, draftUpdate, pushLive, restore, revisionsList, schedule } from './drafts.ts';
import { draftRowsUpdate, publish, rowsRead } from './hubdb-drafts.ts';
import { badRequest, type SimResponse } from './responses.ts';
import { SERVED_ENDPOINTS } from './routes.ts';
import type { WriteContext } from './write-state.ts';
import { batchRead, batchUpdate, redirectRead, redirectUpdate } from './writes.ts';

export interface WriteRoute {
  /** Stats key: method and template, as the list routes' keys (`POST /cms/blogs/2026-03/posts/batch/update`). */
  key: string;
  endpoint: WriteEndpoint;
  params: Record<string, string>;
}

interface Compiled {
  endpoint: WriteEndpoint;
  key: string;
  parts: ({ literal: string } | { param: string })[];
}

// Templates split into segments, those with fewer parameters first (a literal segment wins over a parameter).
const COMPILED: Compiled[] = SERVED_ENDPOINTS.filter(isWriteEndpoint).map((endpoint) => {
  const template = endpoint.template.replace(/\/+$/, '');
  const parts = template.split('/').slice(1).map((s) => {
    const param = /^\{(\w+)\}$/.exec(s)?.[1];
    return param ? { param } : { literal: s };
  });
  return { endpoint, key: `${endpoint.method} ${template}`, parts };
}).sort((a, b) => a.parts.filter((p) => 'param' in p).length - b.parts.filter((p) => 'param' in p).length);

/** The write-side route of a request (trailing slashes ignored), or null. */
export function matchWriteRoute(method: string, rawPath: string): WriteRoute | null {
  const path = rawPath.length > 1 ? rawPath.replace(/\/+$/, '') : rawPath;
  const segments = path.split('/').slice(1);
  for (const compiled of COMPILED) {
    if (compiled.endpoint.method !== method || compiled.parts.length !== segments.length) continue;
    const params: Record<string, string> = {};
    let matched = true;
    for (let i = 0; i < segments.length && matched; i++) {
      const part = compiled.parts[i]!;
      if ('literal' in part) {
        matched = part.literal === segments[i];
      } else {
        const value = decodeSegment(segments[i]!);
        matched = value !== null && value !== '';
        if (matched) params[part.param] = value!;
      }
    }
    if (matched) return { key: compiled.key, endpoint: compiled.endpoint, params };
  }
  return null;
}

function decodeSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/** The request body as JSON (null when empty), or a 400 as HubSpot answers malformed JSON. */
export function parseBody(text: string): { ok: true; body: unknown } | { ok: false; response: SimResponse } {
  if (text.trim() === '') return { ok: true, body: null };
  try {
    return { ok: true, body: JSON.parse(text) as unknown };
  } catch (error) {
    return { ok: false, response: badRequest(`Invalid input JSON: ${(error as Error).message}`) };
  }
}

/** Answers a write-side request. */
export function handleWrite(route: WriteRoute, ctx: WriteContext): SimResponse {
  const type = route.endpoint.type;
  const batchType = type as BatchContentType;
  const versioned = type as VersionedContentType;
  switch (route.endpoint.kind) {
    case 'batch_read': return batchRead(ctx, batchType);
    case 'batch_update': return batchUpdate(ctx, batchType);
    case 'draft_read': return draftRead(ctx, versioned);
    case 'draft_update': return draftUpdate(ctx, versioned);
    case 'push_live': return pushLive(ctx, versioned);
    case 'schedule': return schedule(ctx, versioned);
    case 'revisions': return revisionsList(ctx, versioned);
    case 'restore': return restore(ctx, versioned);
    case 'hubdb_rows_read': return rowsRead(ctx, false);
    case 'hubdb_draft_rows_read': return rowsRead(ctx, true);
    case 'hubdb_draft_rows_update': return draftRowsUpdate(ctx);
    case 'hubdb_publish': return publish(ctx);
    case 'redirect_read': return redirectRead(ctx);
    case 'redirect_update': return redirectUpdate(ctx);
    case 'audit_logs': return ctx.state.audit.query(ctx.query, ctx.pathname, ctx.baseUrl);
  }
}
