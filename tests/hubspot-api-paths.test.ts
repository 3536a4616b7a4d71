// The table of every HubSpot path the product calls (shared/hubspot/api-paths.ts)
// against HubSpot's published spec of each entry's version: the path and method
// are in the spec file, the query parameters and body fields the product sends
// are published, and every field it reads in each answer is in that answer's
// schema (each listed type's export columns and each editable type's editable
// fields among them). The facts come from the spec collection by
// scripts/hubspot-api-spec-facts.ts (tests/fixtures/hubspot-api-spec-facts.json,
// names only). And the simulator routes every path of the table.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONTENT_TYPE_REGISTRY, type ContentType } from '../shared/content-types.ts';
import { API_ENDPOINTS, API_VERSIONS, apiEndpoints, fillPath, type ApiArea, type ApiEndpoint, type ApiVersions } from '../shared/hubspot/api-paths.ts';
import { editableFields } from '../shared/publish-fields.ts';
import { matchOAuthRoute } from '../hubspot-sim/oauth.ts';
import { matchRoute } from '../hubspot-sim/routes.ts';
import { matchWriteRoute } from '../hubspot-sim/write-routes.ts';
import type { FactsFile, SpecFacts } from '../scripts/hubspot-api-spec-facts.ts';

const FACTS = JSON.parse(readFileSync(path.join(import.meta.dirname, 'fixtures/hubspot-api-spec-facts.json'), 'utf8')) as FactsFile;

/**
 * Schemas a spec names but never defines, read as the one it does define: the
 * HubDB rows list's items (as hubspot-sim/schema-facts.ts reads them).
 */
const UNDEFINED_READ_AS: Readonly<Record<string, string>> = { HubDbTableRowV3Wrapper: 'HubDbTableRowV3' };
/** Export columns the product adds itself, not HubSpot's fields (a row's table). */
const OURS: Partial<Record<ContentType, readonly string[]>> = { hubdb_rows: ['tableId'] };

/** The fields the product reads in an endpoint's answers and sends in its body: the table's, plus export columns and editable fields. */
function reliances(e: ApiEndpoint): { body: string[]; answers: Record<string, string[]> } {
  const body = [...(e.relies.body ?? [])];
  const answers: Record<string, string[]> = Object.fromEntries(Object.entries(e.relies.answers).map(([k, v]) => [k, [...v]]));
  if ((e.kind === 'list' || e.kind === 'rows') && e.type) {
    const ours = OURS[e.type] ?? [];
    (answers['200'] ??= []).push(...CONTENT_TYPE_REGISTRY[e.type].exportColumns.filter((c) => !ours.includes(c)).map((c) => `results[].${c}`));
  }
  if (e.type && (e.kind === 'draft_update' || e.kind === 'redirect_update')) body.push(...Object.keys(editableFields(e.type)));
  if (e.kind === 'hubdb_draft_rows_update') body.push(...Object.keys(editableFields('hubdb_rows')).map((f) => `inputs[].${f}`));
  return { body, answers };
}

/** Why `field` (`results[].id`, `paging.next.after`) is not in a value of `type`, or null when it is. */
function missingField(spec: SpecFacts, type: string | null, field: string): string | null {
  let types = type === null ? [] : [type];
  for (const segment of field.split('.')) {
    const array = segment.endsWith('[]');
    const name = array ? segment.slice(0, -2) : segment;
    const next: string[] = [];
    for (const t of types.flatMap((x) => x.split('|'))) {
      const fieldType = spec.schemas[UNDEFINED_READ_AS[t] ?? t]?.[name];
      if (fieldType === undefined) continue;
      if (!array) next.push(fieldType);
      else if (fieldType.endsWith('[]')) next.push(fieldType.slice(0, -2));
    }
    if (next.length === 0) return `${field}: no ${segment} in ${types.join(' or ') || 'an empty answer'}`;
    types = next;
  }
  return null;
}

/** Every way the endpoints differ from the spec of their versions (empty: none). */
function checkAgainstSpec(endpoints: readonly ApiEndpoint[], versions: ApiVersions, facts: FactsFile = FACTS): string[] {
  const problems: string[] = [];
  for (const e of endpoints) {
    const version = versions[e.area];
    const spec = facts.specs.find((s) => s.area === e.area && s.version === version);
    const key = `${e.method} ${e.template}`;
    if (!spec) {
      problems.push(`${key}: no facts of ${e.area} at ${version} (scripts/hubspot-api-spec-facts.ts records them)`);
      continue;
    }
    if (!spec.operations.includes(key)) {
      problems.push(`${key}: not in ${spec.file}`);
      continue;
    }
    const op = spec.used[key];
    if (!op) {
      problems.push(`${key}: in ${spec.file}, but its facts are not recorded (run scripts/hubspot-api-spec-facts.ts)`);
      continue;
    }
    for (const q of e.relies.query ?? []) if (!op.query.includes(q)) problems.push(`${key}: query parameter ${q} is not published`);
    const { body, answers } = reliances(e);
    for (const f of body) {
      const why = missingField(spec, op.body, f);
      if (why) problems.push(`${key} body ${why}`);
    }
    for (const [status, fields] of Object.entries(answers)) {
      if (!(status in op.answers)) {
        problems.push(`${key}: no ${status} answer published`);
        continue;
      }
      for (const f of fields) {
        const why = missingField(spec, op.answers[status]!, f);
        if (why) problems.push(`${key} ${status} ${why}`);
      }
    }
  }
  return problems;
}

const AREAS = Object.keys(API_VERSIONS) as ApiArea[];
const allAt = (version: 'v3' | '2026-03'): ApiVersions => Object.fromEntries(AREAS.map((a) => [a, version])) as ApiVersions;

describe('the table of HubSpot paths against the published spec of each version', () => {
  it('every path and method the product calls, at its version, is published with every field the product relies on', () => {
    expect(checkAgainstSpec(API_ENDPOINTS, API_VERSIONS)).toEqual([]);
    // Every area has its facts, and every kind of call was checked.
    expect(new Set(API_ENDPOINTS.map((e) => e.area))).toEqual(new Set(AREAS));
    expect(API_ENDPOINTS.length).toBeGreaterThan(40);
  });

  it('every area at 2026-03 passes: the one-line move is proved for each', () => {
    expect(checkAgainstSpec(apiEndpoints(allAt('2026-03')), allAt('2026-03'))).toEqual([]);
  });

  it('at v3 the check finds the two collections the newest v3 files no longer list at the official client\'s paths', () => {
    // The official client's /cms/v3/url-redirects/ and /cms/v3/audit-logs/; the v3 files
    // list them at /cms/url-redirects/v3 and /cms/audit-logs/v3.
    expect(checkAgainstSpec(apiEndpoints(allAt('v3')), allAt('v3'))).toEqual([
      'GET /cms/v3/url-redirects/: not in PublicApiSpecs/CMS/Url Redirects/Rollouts/149916/v3/urlRedirects.json',
      'GET /cms/v3/audit-logs/: not in PublicApiSpecs/CMS/Cms Content Audit/Rollouts/144888/v3/cmsContentAudit.json',
    ]);
  });

  it('fails on a version without facts, a path or method the spec lacks, and a field or parameter it does not publish', () => {
    const list = API_ENDPOINTS.find((e) => e.kind === 'list' && e.type === 'blog_posts')!;
    expect(checkAgainstSpec([list], { ...API_VERSIONS, blog_posts: '2025-03' })).toEqual([
      `GET ${list.template}: no facts of blog_posts at 2025-03 (scripts/hubspot-api-spec-facts.ts records them)`,
    ]);
    expect(checkAgainstSpec([{ ...list, template: `${list.template}s` }], API_VERSIONS)).toEqual([`GET ${list.template}s: not in ${
      FACTS.specs.find((s) => s.area === 'blog_posts' && s.version === API_VERSIONS.blog_posts)!.file}`]);
    expect(checkAgainstSpec([{ ...list, method: 'PATCH' }], API_VERSIONS)).toHaveLength(1);
    const relying = (relies: ApiEndpoint['relies']) => checkAgainstSpec([{ ...list, relies }], API_VERSIONS);
    expect(relying({ query: ['updatedSince'], answers: { 200: ['paging.next.cursor', 'results[].nope', 'total[]'] } })).toEqual([
      `GET ${list.template}: query parameter updatedSince is not published`,
      `GET ${list.template} 200 paging.next.cursor: no cursor in NextPage`,
      `GET ${list.template} 200 results[].nope: no nope in BlogPost`,
      `GET ${list.template} 200 total[]: no total[] in CollectionResponseWithTotalBlogPostForwardPaging`,
    ]);
    expect(relying({ answers: { 207: [] } })).toEqual([`GET ${list.template}: no 207 answer published`]);
    // A redirect's `updated` is published at v3 and 2026-03 alike; an editable field it lacked would fail.
    const patch = API_ENDPOINTS.find((e) => e.kind === 'redirect_update')!;
    expect(checkAgainstSpec([{ ...patch, relies: { ...patch.relies, body: ['isRegex'] } }], API_VERSIONS)).toEqual([`${patch.method} ${patch.template} body isRegex: no isRegex in UrlMapping`]);
  });
});

describe('the simulator serves what the client asks for', () => {
  const PARAMS = { objectId: '101', revisionId: '7', tableIdOrName: '5', urlRedirectId: '9' };

  it.each(API_ENDPOINTS.map((e) => [`${e.method} ${e.template}`, e] as const))('%s', (_, e) => {
    const pathname = fillPath(e.template, PARAMS);
    const route = matchOAuthRoute(e.method, pathname) ?? matchRoute(e.method, pathname) ?? matchWriteRoute(e.method, pathname);
    expect(route?.key).toBe(`${e.method} ${e.template.replace(/\/+$/, '')}`);
  });

  it('also answers the v3 paths the official client\'s typed APIs call, as HubSpot does, and no other version', () => {
    const v3 = apiEndpoints(allAt('v3'));
    expect(v3.filter((e) => API_VERSIONS[e.area] !== 'v3').length).toBeGreaterThan(30);
    for (const e of v3) {
      const pathname = fillPath(e.template, PARAMS);
      expect((matchOAuthRoute(e.method, pathname) ?? matchRoute(e.method, pathname) ?? matchWriteRoute(e.method, pathname))?.key).toBe(`${e.method} ${e.template.replace(/\/+$/, '')}`);
    }
    const other = apiEndpoints({ ...allAt('2026-03'), pages: '2025-09', blog_posts: '2025-09', hubdb: '2025-09', oauth: '2025-09' })
      .filter((e) => ['pages', 'blog_posts', 'hubdb', 'oauth'].includes(e.area));
    for (const e of other) {
      const pathname = fillPath(e.template, PARAMS);
      expect(matchOAuthRoute(e.method, pathname) ?? matchRoute(e.method, pathname) ?? matchWriteRoute(e.method, pathname), pathname).toBeNull();
    }
  });
});
