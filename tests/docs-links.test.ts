// The documentation stays true to the repository: every relative link in
// README.md, web/README.md and docs/**/*.md resolves to a file (and its #anchor
// to a heading there); every SQL function docs/sql-api.md names exists in a
// freshly migrated database, and every function the service role may call is
// named there; docs/http-api.md lists exactly the paths and methods of
// openapi.json.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../local/postgres.ts';
import { useTestDatabase } from './support/database.ts';

const db = useTestDatabase();

/** Markdown files the links of which are checked, relative to the project root. */
function markdownFiles(): string[] {
  const files = ['README.md', 'web/README.md'];
  const walk = (dir: string) => {
    for (const entry of readdirSync(path.join(PROJECT_ROOT, dir), { withFileTypes: true })) {
      const rel = path.posix.join(dir, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.md')) files.push(rel);
    }
  };
  walk('docs');
  return files;
}

/** Fenced code blocks, indented ones (inside list items) included. */
const FENCED = /^[ \t]*(```|~~~)[^\n]*\n[\s\S]*?^[ \t]*\1[^\n]*$/gm;

const read = (rel: string) => readFileSync(path.join(PROJECT_ROOT, rel), 'utf8');

/** The text outside fenced code blocks, with inline code spans blanked (links in code are not links). */
function prose(markdown: string): string {
  return markdown
    .replace(FENCED, '')
    .replace(/`[^`\n]*`/g, '``');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2, … */
export function headingAnchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  const text = markdown.replace(FENCED, '');
  for (const [, title] of text.matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const plain = title!
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .replace(/[*`]/g, '');
    const base = plain.toLowerCase().replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '').trim().replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every [text](target) and ![alt](target) in the prose of a markdown file. */
export function linkTargets(markdown: string): string[] {
  return [...prose(markdown).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
}

/** The broken relative links of one markdown file (relative to the project root), as messages. */
export function brokenLinks(rel: string, markdown = read(rel)): string[] {
  const broken: string[] = [];
  for (const target of linkTargets(markdown)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, …
    const hash = target.indexOf('#');
    const filePart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
    const anchor = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
    const resolved = filePart ? path.posix.normalize(path.posix.join(path.posix.dirname(rel), filePart)) : rel;
    if (resolved.startsWith('..')) {
      broken.push(`${rel}: ${target} points outside the repository`);
      continue;
    }
    const abs = path.join(PROJECT_ROOT, resolved);
    if (!existsSync(abs)) {
      broken.push(`${rel}: ${target} → ${resolved} does not exist`);
      continue;
    }
    if (anchor !== null) {
      if (!resolved.endsWith('.md') || statSync(abs).isDirectory()) {
        broken.push(`${rel}: ${target} has an anchor on a file that is not markdown`);
        continue;
      }
      const anchors = headingAnchors(resolved === rel ? markdown : read(resolved));
      if (!anchors.has(anchor)) broken.push(`${rel}: ${target} → no heading #${anchor} in ${resolved}`);
    }
  }
  return broken;
}

/** Schema-qualified names in a markdown text: `public.name(` is a function, `public.name` a function or a relation. */
export function sqlNames(markdown: string): { schema: string; name: string; call: boolean }[] {
  const names = [...markdown.matchAll(/\b(public|private)\.([a-z_][a-z0-9_]*)(\()?/g)].map((m) => ({ schema: m[1]!, name: m[2]!, call: !!m[3] }));
  const unique = new Map(names.map((n) => [`${n.schema}.${n.name}${n.call ? '(' : ''}`, n]));
  return [...unique.values()];
}

/** The `METHOD /path` endpoints a markdown text names (query strings dropped). */
export function endpoints(markdown: string): Set<string> {
  return new Set([...markdown.matchAll(/`(GET|POST|PUT|PATCH|DELETE|OPTIONS|HEAD) (\/[^`?\s]*)[^`]*`/g)].map((m) => `${m[1]} ${m[2]}`));
}

/** Test and benchmark helpers (queue_test.*, created for tests only): never to be documented as the API, wherever they live. */
const NOT_PRODUCT_API = ['save_fetched_page', 'claim_next_job', 'complete_job_and_claim_next'];

describe('relative links in the documentation', () => {
  const files = markdownFiles();

  it('covers README.md and the docs folder', () => {
    expect(files).toContain('README.md');
    expect(files).toContain('docs/sql-api.md');
    expect(files.length).toBeGreaterThanOrEqual(10);
  });

  it.each(files)('%s: every relative link and #anchor resolves', (rel) => {
    expect(brokenLinks(rel)).toEqual([]);
  });

  it('the check fails for a missing file or heading (it can fail)', () => {
    const sample = ['[a](docs/no-such-file.md)', '[b](docs/sql-api.md#no-such-heading)', '[c](#quickstart)', '[d](docs/sql-api.md#tables)', '`[e](not-a-link.md)`'].join('\n');
    expect(brokenLinks('README.md', `# pg-edge-queue\n\n## Quickstart\n\n${sample}\n`)).toEqual([
      'README.md: docs/no-such-file.md → docs/no-such-file.md does not exist',
      'README.md: docs/sql-api.md#no-such-heading → no heading #no-such-heading in docs/sql-api.md',
    ]);
  });

  it("computes GitHub's heading anchors", () => {
    const anchors = headingAnchors('# Measured: performance, reliability, limits\n## `orchestrator` (`/functions/v1/orchestrator`)\n## Queue throughput (scenarios 1–6)\n## 3. The flow\n## Notes\n## Notes\n');
    expect([...anchors]).toEqual(['measured-performance-reliability-limits', 'orchestrator-functionsv1orchestrator', 'queue-throughput-scenarios-16', '3-the-flow', 'notes', 'notes-1']);
  });
});

describe('docs/sql-api.md against the live schema', () => {
  const doc = read('docs/sql-api.md');

  async function liveSchema() {
    const functions = await db.sql<{ schema: string; name: string; service: boolean; definer: boolean }[]>`
      select n.nspname as schema, p.proname as name, has_function_privilege('service_role', p.oid, 'execute') as service, p.prosecdef as definer
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname in ('public', 'private')`;
    const relations = await db.sql<{ schema: string; name: string }[]>`
      select n.nspname as schema, c.relname as name
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where n.nspname in ('public', 'private') and c.relkind in ('r', 'p', 'v', 'm', 'f')`;
    return {
      functions: new Set(functions.map((f) => `${f.schema}.${f.name}`)),
      serviceFunctions: functions.filter((f) => f.schema === 'public' && f.service).map((f) => f.name),
      invokerFunctions: functions.filter((f) => f.schema === 'public' && f.service && !f.definer).map((f) => f.name).sort(),
      relations: new Set(relations.map((r) => `${r.schema}.${r.name}`)),
    };
  }

  /** Names the doc uses that the database does not have, as messages. */
  function missing(text: string, live: Awaited<ReturnType<typeof liveSchema>>): string[] {
    return sqlNames(text)
      .filter((n) => (n.call ? !live.functions.has(`${n.schema}.${n.name}`) : !live.functions.has(`${n.schema}.${n.name}`) && !live.relations.has(`${n.schema}.${n.name}`)))
      .map((n) => `${n.schema}.${n.name}${n.call ? '(' : ''}`);
  }

  it('every function and table it names exists (and a bogus one is caught)', async () => {
    const live = await liveSchema();
    const named = sqlNames(doc).filter((n) => n.call);
    expect(named.length).toBeGreaterThanOrEqual(30);
    expect(missing(doc, live)).toEqual([]);
    expect(missing('`public.claim_jobs(…)`, `public.no_such_function(…)`, `private.no_such_table`', live)).toEqual(['public.no_such_function(', 'private.no_such_table']);
  });

  it('names every function the service role may call, and none of the test-only ones', async () => {
    const live = await liveSchema();
    const documented = new Set(sqlNames(doc).filter((n) => n.schema === 'public' && n.call).map((n) => n.name));
    const undocumented = live.serviceFunctions.filter((name) => !documented.has(name) && !NOT_PRODUCT_API.includes(name));
    expect(undocumented).toEqual([]);
    expect(NOT_PRODUCT_API.filter((name) => documented.has(name))).toEqual([]);
  });

  it('says which functions are not SECURITY DEFINER: exactly those the catalog runs as their caller', async () => {
    const live = await liveSchema();
    expect(invokerFunctions(doc)).toEqual(live.invokerFunctions.filter((name) => !NOT_PRODUCT_API.includes(name)));
    // It can fail: a row that does not say so is not counted, one that does is.
    expect(invokerFunctions('| `public.a(x)` | `int` | reads. |\n| `public.b(x)` / `public.c()` | `int` | `SECURITY INVOKER`: reads. |')).toEqual(['b', 'c']);
  });
});

/** The public functions of the doc's table rows that say `SECURITY INVOKER`, sorted. */
function invokerFunctions(markdown: string): string[] {
  return markdown.split('\n').filter((line) => line.startsWith('| `public.') && line.includes('`SECURITY INVOKER`'))
    .flatMap((line) => sqlNames(line.split(' | ')[0]!).filter((n) => n.schema === 'public' && n.call).map((n) => n.name)).sort();
}

describe('docs/http-api.md against openapi.json', () => {
  const doc = read('docs/http-api.md');
  const spec = JSON.parse(read('openapi.json')) as { paths: Record<string, Record<string, unknown>> };
  const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'options', 'head'];
  const inSpec = new Set(Object.entries(spec.paths).flatMap(([p, ops]) => Object.keys(ops).filter((m) => METHODS.includes(m)).map((m) => `${m.toUpperCase()} ${p}`)));
  // The worker is not a user-facing API: openapi.json describes the orchestrator only.
  const NOT_IN_SPEC = new Set(['POST /worker']);

  it('every path and method of openapi.json is in the doc', () => {
    expect(inSpec.size).toBeGreaterThanOrEqual(5);
    const named = endpoints(doc);
    expect([...inSpec].filter((e) => !named.has(e))).toEqual([]);
  });

  it('every endpoint the doc names is in openapi.json (or is the worker)', () => {
    const named = [...endpoints(doc)].filter((e) => !NOT_IN_SPEC.has(e));
    expect(named.filter((e) => !inSpec.has(e))).toEqual([]);
    // It can fail: an endpoint the spec does not have is reported.
    expect([...endpoints('`GET /orchestrator/nope?x=1`, `GET /orchestrator/runs`')].filter((e) => !inSpec.has(e))).toEqual(['GET /orchestrator/nope']);
  });
});
