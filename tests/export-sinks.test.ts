// Export sinks: the local directory sink for real; the Storage sink only
// against a real Supabase stack.
import { readdir, readFile } from 'node:fs/promises';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { localDirectorySink, supabaseStorageSink } from '../functions/worker/export-sink.ts';

describe('local directory sink', () => {
  it('publishes a file only on commit, atomically, and leaves nothing on abort', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'sink-'));
    const sink = localDirectorySink(root);
    const w = await sink.open('owner/run/blog_posts.csv', '101');
    await w.write('a,b\r\n');
    await w.write('1,2\r\n');
    expect(await readdir(path.join(root, 'owner/run'))).toEqual(['blog_posts.csv.partial-101']);
    const file = await w.commit();
    expect(file.bytes).toBe(10);
    expect(await readFile(file.location, 'utf8')).toBe('a,b\r\n1,2\r\n');
    expect(await readdir(path.join(root, 'owner/run'))).toEqual(['blog_posts.csv']);

    const aborted = await sink.open('owner/run/site_pages.csv', '102');
    await aborted.write('half');
    await aborted.abort();
    expect(await readdir(path.join(root, 'owner/run'))).toEqual(['blog_posts.csv']);
  });
});

// Needs a running Supabase stack (`supabase start`, or a project) with a private
// bucket named `exports`: set SUPABASE_URL and SUPABASE_SERVICE_ROLE_KEY to run it.
// Without them this machine has no Storage API to talk to, so it is skipped.
const storageConfigured = Boolean(process.env.SUPABASE_URL && process.env.SUPABASE_SERVICE_ROLE_KEY);
describe.skipIf(!storageConfigured)('Supabase Storage sink (real stack only)', () => {
  it('streams a file into the exports bucket and signs a download URL', async () => {
    const sink = supabaseStorageSink({ supabaseUrl: process.env.SUPABASE_URL!, serviceKey: process.env.SUPABASE_SERVICE_ROLE_KEY! });
    const w = await sink.open(`test/${crypto.randomUUID()}/x.csv`, '1');
    await w.write('a,b\r\n1,2\r\n');
    const file = await w.commit();
    expect(file.url).toBeTruthy();
    const res = await fetch(file.url!);
    expect(await res.text()).toBe('a,b\r\n1,2\r\n');
  });
});
