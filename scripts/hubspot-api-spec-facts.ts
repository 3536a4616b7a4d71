// Writes tests/fixtures/hubspot-api-spec-facts.json: what HubSpot's published
// spec files say about the paths the product calls (shared/hubspot/api-paths.ts),
// at v3 and at each dated version named below, read from a local clone of
// HubSpot/HubSpot-public-api-spec-collection. Names only, never the spec's
// text: each file's operations (method and path), and for each operation the
// product calls at that version its query parameters, request body and answer
// schemas by name, and those schemas' field names and types.
// tests/hubspot-api-paths.test.ts checks the table against them.
//
//   npx tsx scripts/hubspot-api-spec-facts.ts --spec-repo <git dir> [--check]
//
// `--check` writes nothing and exits 1 when the file differs from what the
// clone says. A new dated version: add it to VERSIONS and run again.
import { execFileSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { API_VERSIONS, apiEndpoints, type ApiArea, type ApiVersion, type ApiVersions } from '../shared/hubspot/api-paths.ts';
import { PROJECT_ROOT } from '../local/postgres.ts';

export const FACTS_PATH = path.join(PROJECT_ROOT, 'tests/fixtures/hubspot-api-spec-facts.json');

/** The versions recorded for every area. */
const VERSIONS: readonly ApiVersion[] = ['v3', '2026-03'];

/** Each area's spec file (`{version}` filled in) in the collection. */
const SPEC_FILES: Readonly<Record<ApiArea, string>> = {
  pages: 'PublicApiSpecs/CMS/Pages/Rollouts/59888/{version}/pages.json',
  blog_posts: 'PublicApiSpecs/CMS/Posts/Rollouts/635/{version}/posts.json',
  blog_authors: 'PublicApiSpecs/CMS/Authors/Rollouts/635/{version}/authors.json',
  blog_tags: 'PublicApiSpecs/CMS/Tags/Rollouts/635/{version}/tags.json',
  hubdb: 'PublicApiSpecs/CMS/Hubdb/Rollouts/243927/{version}/hubdb.json',
  url_redirects: 'PublicApiSpecs/CMS/Url Redirects/Rollouts/149916/{version}/urlRedirects.json',
  audit_logs: 'PublicApiSpecs/CMS/Cms Content Audit/Rollouts/144888/{version}/cmsContentAudit.json',
  account_info: 'PublicApiSpecs/Account/Account Info/Rollouts/144923/{version}/accountInfo.json',
  oauth: 'PublicApiSpecs/Auth/Oauth/Rollouts/279897/{version}/oauth.json',
};

/** An operation the product calls: its query parameters, and its body and answers (per status) as schema types. */
export interface OperationFacts {
  query: string[];
  body: string | null;
  answers: Record<string, string | null>;
}

/**
 * One spec file. A schema maps field names to types: `string`, `integer`,
 * `number`, `boolean`, `date-time`, `object` (any object or map: not looked
 * into), another schema's name, `T[]` (an array of T), or `A|B` (one of).
 */
export interface SpecFacts {
  area: ApiArea;
  version: ApiVersion;
  file: string;
  operations: string[];
  used: Record<string, OperationFacts>;
  schemas: Record<string, Record<string, string>>;
}

export interface FactsFile {
  source: string;
  commit: string;
  specs: SpecFacts[];
}

type Json = Record<string, unknown>;
/**
 * How deep below an operation schemas are recorded: an answer (1), its items,
 * paging and errors (2), their fields' schemas (3: a revision's page, paging's
 * next page). Deeper ones (a page's layout sections) are named, not recorded.
 */
const DEPTH = 3;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

/** The facts of one spec file, for the operations the product calls at its version. */
function factsOf(area: ApiArea, version: ApiVersion, file: string, spec: Json): SpecFacts {
  const paths = spec['paths'] as Record<string, Json>;
  const operations = Object.entries(paths).flatMap(([p, item]) => METHODS.filter((m) => m in item).map((m) => `${m.toUpperCase()} ${p}`)).sort();
  const schemas: Record<string, Record<string, string>> = {};
  /** The node a `$ref` points at; an empty schema where the file never defines it (HubDB's HubDbTableRowV3Wrapper). */
  const deref = (node: Json): Json => {
    let n: Json | undefined = node;
    while (n && typeof n['$ref'] === 'string') n = (n['$ref'] as string).slice(2).split('/').reduce<Json | undefined>((o, k) => o?.[k] as Json | undefined, spec);
    return n ?? {};
  };
  /** The type of a schema node, recording the object schemas it names down to DEPTH levels below an operation. */
  const typeOf = (node: Json, nameIfInline: string, depth = 1): string => {
    const ref = node['$ref'];
    if (typeof ref === 'string') {
      const name = ref.split('/').pop()!;
      const target = deref(node);
      if (target['oneOf'] || target['anyOf'] || target['allOf']) return typeOf(target, name, depth); // a named union: its members
      if (Object.keys(target).length === 0) return name; // never defined: named, not recorded
      if (!(name in schemas) && depth <= DEPTH) define(name, target, depth);
      return name;
    }
    const one = (node['oneOf'] ?? node['anyOf']) as Json[] | undefined;
    if (one) return one.map((n, i) => typeOf(n, `${nameIfInline}#${i}`, depth)).join('|');
    if (node['allOf']) {
      const merged: Json = { type: 'object', properties: {} };
      for (const part of node['allOf'] as Json[]) Object.assign(merged['properties'] as Json, deref(part)['properties'] ?? {});
      return typeOf(merged, nameIfInline, depth);
    }
    if (node['type'] === 'array') return node['items'] ? `${typeOf(node['items'] as Json, `${nameIfInline}[]`, depth)}[]` : 'object[]';
    if (node['type'] === 'object' || node['properties']) {
      if (!node['properties'] || Object.keys(node['properties'] as Json).length === 0) return 'object';
      if (!(nameIfInline in schemas) && depth <= DEPTH) define(nameIfInline, node, depth);
      return nameIfInline;
    }
    if (node['type'] === 'string' && node['format'] === 'date-time') return 'date-time';
    return typeof node['type'] === 'string' ? node['type'] : 'object';
  };
  const define = (name: string, node: Json, depth: number): void => {
    const fields: Record<string, string> = {};
    schemas[name] = fields; // before the fields: a schema may name itself
    const props = (node['properties'] ?? {}) as Record<string, Json>;
    for (const field of Object.keys(props).sort()) fields[field] = typeOf(props[field]!, `${name}.${field}`, depth + 1);
  };
  const used: Record<string, OperationFacts> = {};
  const versions = Object.fromEntries(Object.keys(API_VERSIONS).map((a) => [a, version])) as ApiVersions;
  for (const e of apiEndpoints(versions).filter((x) => x.area === area)) {
    const key = `${e.method} ${e.template}`;
    const item = paths[e.template];
    const op = item?.[e.method.toLowerCase()] as Json | undefined;
    if (!op || key in used) continue;
    const params = [...((item!['parameters'] ?? []) as Json[]), ...((op['parameters'] ?? []) as Json[])].map(deref);
    const bodyNode = op['requestBody'] ? deref(op['requestBody'] as Json) : null;
    const bodySchema = bodyNode ? Object.values(bodyNode['content'] as Record<string, Json>)[0]?.['schema'] as Json | undefined : undefined;
    const answers: Record<string, string | null> = {};
    for (const [status, raw] of Object.entries(op['responses'] as Record<string, Json>)) {
      const schema = Object.values((deref(raw)['content'] ?? {}) as Record<string, Json>)[0]?.['schema'] as Json | undefined;
      answers[status] = schema ? typeOf(schema, `${key} ${status}`) : null;
    }
    used[key] = {
      query: params.filter((p) => p['in'] === 'query').map((p) => String(p['name'])).sort(),
      body: bodySchema ? typeOf(bodySchema, `${key} body`) : null,
      answers,
    };
  }
  const sorted = Object.fromEntries(Object.keys(schemas).sort().map((k) => [k, schemas[k]!]));
  return { area, version, file, operations, used, schemas: sorted };
}

/** The facts file's text: one line per operation and per schema. */
export function factsText(facts: FactsFile): string {
  const line = (v: unknown) => JSON.stringify(v);
  const block = (entries: [string, unknown][], indent: string) =>
    entries.length === 0 ? '{}' : `{\n${entries.map(([k, v]) => `${indent}  ${line(k)}: ${line(v)}`).join(',\n')}\n${indent}}`;
  const specs = facts.specs.map((s) => [
    '    {',
    `      "area": ${line(s.area)}, "version": ${line(s.version)}, "file": ${line(s.file)},`,
    `      "operations": [\n${s.operations.map((o) => `        ${line(o)}`).join(',\n')}\n      ],`,
    `      "used": ${block(Object.entries(s.used), '      ')},`,
    `      "schemas": ${block(Object.entries(s.schemas), '      ')}`,
    '    }',
  ].join('\n'));
  return `{\n  "source": ${line(facts.source)},\n  "commit": ${line(facts.commit)},\n  "specs": [\n${specs.join(',\n')}\n  ]\n}\n`;
}

/** Reads every area's spec file at every version from the clone. */
export function readFacts(gitDir: string): FactsFile {
  const git = (...args: string[]) => execFileSync('git', [`--git-dir=${gitDir}`, ...args], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const commit = git('rev-parse', 'HEAD').trim();
  const specs: SpecFacts[] = [];
  for (const area of Object.keys(SPEC_FILES) as ApiArea[]) {
    for (const version of VERSIONS) {
      const file = SPEC_FILES[area].replace('{version}', version);
      specs.push(factsOf(area, version, file, JSON.parse(git('show', `${commit}:${file}`)) as Json));
    }
  }
  return { source: 'github.com/HubSpot/HubSpot-public-api-spec-collection', commit, specs };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { 'spec-repo': { type: 'string' }, check: { type: 'boolean', default: false } } });
  if (!values['spec-repo']) {
    console.error('usage: npx tsx scripts/hubspot-api-spec-facts.ts --spec-repo <git dir of HubSpot-public-api-spec-collection> [--check]');
    process.exit(2);
  }
  const text = factsText(readFacts(values['spec-repo']));
  const relative = path.relative(process.cwd(), FACTS_PATH);
  if (values.check) {
    if ((await readFile(FACTS_PATH, 'utf8').catch(() => '')) !== text) {
      console.error(`${relative} differs from the spec collection: run without --check to rewrite it`);
      process.exit(1);
    }
    console.log(`${relative} is up to date`);
  } else {
    await writeFile(FACTS_PATH, text);
    console.log(`wrote ${relative}`);
  }
}
