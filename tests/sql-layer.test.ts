// One SQL call layer: every call of a public.* function and every query of a
// queue table made from TypeScript lives in shared/sql/ (one file per area,
// grouped as supabase/schemas/ is numbered). Outside it, no product file
// (functions/, shared/, web/) holds SQL text that names a public. or
// private. object, so a changed SQL signature is changed in one place.
import { describe, expect, it } from 'vitest';
import { productFiles, readSource, withoutComments } from './support/source-files.ts';

/** SQL naming a schema-qualified object: `from public.jobs`, `select public.claim_jobs(`, `delete from private.x`, `copy (select … from public.f(`. */
const SQL_NAMING_OBJECT = [
  /\b(?:from|join|into|update|select|call|table|lateral)\s+(?:only\s+)?(?:public|private)\.[a-z_]+/i,
  // A call of a schema-qualified function anywhere in a query (not a `code span` in a description).
  /(?<![`\w.])(?:public|private)\.[a-z_]+\s*\(/,
];

/** Lines of `source` (comments blanked) with SQL text naming a public. or private. object. */
function sqlLines(source: string): string[] {
  return withoutComments(source).split('\n').filter((line) => SQL_NAMING_OBJECT.some((re) => re.test(line)));
}

describe('the SQL call layer', () => {
  it('recognises SQL text naming public. and private. objects, and not prose or comments', () => {
    expect(sqlLines('const [row] = await sql`select public.claim_jobs(${id}, 1)`;')).toHaveLength(1);
    expect(sqlLines('await tx`select id from public.portals where id = ${id}`;')).toHaveLength(1);
    expect(sqlLines('  from public.jobs jj where jj.run_id = r.id) j')).toHaveLength(1);
    expect(sqlLines('await tx`delete from private.portal_credentials where portal_id = ${p}`;')).toHaveLength(1);
    expect(sqlLines("const q = 'copy (select e.v[1] from public.export_rows(' + id + ')) to stdout';")).toHaveLength(1);
    expect(sqlLines('// public.disconnect_portal marks it disconnected')).toHaveLength(0);
    expect(sqlLines("describe('What `public.queue_stats()` returns, in `private.write_limit_settings`.')")).toHaveLength(0);
  });

  it('no product file outside shared/sql/ holds SQL text naming a public. or private. object', () => {
    const offenders = productFiles()
      .filter((f) => !f.startsWith('shared/sql/'))
      .flatMap((f) => sqlLines(readSource(f)).map((line) => `${f}: ${line.trim().slice(0, 120)}`));
    expect(offenders).toEqual([]);
  });

  it('the layer exists: one file per area', () => {
    const layer = productFiles().filter((f) => f.startsWith('shared/sql/'));
    expect(layer.length).toBeGreaterThan(5);
    // Nothing in the layer reaches back into the functions (it is called, never calling up).
    for (const f of layer) expect(readSource(f), f).not.toMatch(/from '\.\.\/\.\.\/functions\//);
  });
});
