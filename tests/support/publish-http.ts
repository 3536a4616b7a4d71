// Helpers for the publish endpoints' tests (tests/orchestrator-publish*.test.ts):
// calls to the handler as a user (JSON actions, reads, CSV uploads), each
// answer read whole, and a digest of everything a publish call could write.
import { expect } from 'vitest';
import type { z } from 'zod';
import type { Sql } from '../../shared/db.ts';
import type { OrchestratorHarness } from './orchestrator-harness.ts';

export interface Answer {
  status: number;
  body: any;
  headers: Headers;
}

const BASE = 'http://127.0.0.1/functions/v1/orchestrator';

async function answer(res: Response): Promise<Answer> {
  const text = await res.text();
  const isJson = res.headers.get('content-type')?.startsWith('application/json');
  return { status: res.status, body: isJson ? JSON.parse(text) : text, headers: res.headers };
}

/** The handler, called as the holder of `token`. */
export function publishClient(h: OrchestratorHarness) {
  return {
    /** POST /orchestrator with a JSON body (an action). */
    post: async (token: string, body: unknown) => answer(await h.handler(h.request('POST', { token, body }))),
    /** GET /orchestrator<pathAndQuery>. */
    get: async (token: string, pathAndQuery: string) => answer(await h.handler(new Request(`${BASE}${pathAndQuery}`, { headers: { Authorization: `Bearer ${token}` } }))),
    /** POST /orchestrator/publish/csv?<query> with the file (text/csv unless told). */
    upload: async (token: string, query: string, file: string | Uint8Array, headers: Record<string, string> = {}) =>
      answer(await h.handler(new Request(`${BASE}/publish/csv?${query}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'text/csv', ...headers },
        body: file as BodyInit,
      }))),
  };
}

/** A digest of every table a publish call may write (edits, plans, items, runs, jobs, notifications, the copy). */
export async function publishDigest(sql: Sql): Promise<string> {
  const [row] = await sql`select md5(concat_ws('|',
      (select string_agg(t::text, ',' order by t.id) from public.content_edits t),
      (select string_agg(t::text, ',' order by t.id) from public.publish_plans t),
      (select string_agg(t::text, ',' order by t.id) from public.publish_items t),
      (select string_agg(t::text, ',' order by t.id) from public.runs t),
      (select string_agg(t::text, ',' order by t.id) from public.jobs t),
      (select string_agg(t::text, ',' order by t.id) from public.notifications t),
      (select string_agg(t::text, ',' order by t.id) from public.hubspot_content t))) as digest`;
  return row!.digest as string;
}

/** Asserts an answer is the refusal (status and code, with a message) and that it changed nothing. */
export async function expectRefused(sql: Sql, call: () => Promise<Answer>, status: number, code: string): Promise<Answer> {
  const before = await publishDigest(sql);
  const a = await call();
  expect(a.status, JSON.stringify(a.body)).toBe(status);
  expect(a.body.code, JSON.stringify(a.body)).toBe(code);
  expect(typeof a.body.message).toBe('string');
  expect(await publishDigest(sql), `${status} ${code} changed something`).toBe(before);
  return a;
}

/** The body, checked against its documented schema. */
export function documented<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  expect(r.success, `${JSON.stringify(body).slice(0, 500)}: ${JSON.stringify(r.error?.issues.slice(0, 3))}`).toBe(true);
  return r.data as z.infer<T>;
}
