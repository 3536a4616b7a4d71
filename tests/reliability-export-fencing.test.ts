// An export attempt that loses its lease while publishing its file. The export
// job checks its lease (heartbeat) after each stored chunk and right before
// publishing, but it can still stall between that check and the publication
// (GC pause, frozen VM, slow storage) while another worker resumes the job from
// its checkpoint and completes it. The stale attempt's publication must then
// fail rather than replace or corrupt the completed file: its partial file was
// continued and published by the new holder (a writer opens the partial file
// for each chunk and never creates it), and only the completing attempt's
// location is recorded in the job's result.
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { type ExportSink } from '../functions/worker/export-sink.ts';
import { localDirectorySink } from '../functions/worker/local-sink.ts';
import { localExportPath } from '../shared/export-location.ts';
import { runWorkerInvocation, type WorkerRuntime } from '../functions/worker/invocation.ts';
import { silentLogger } from '../shared/log.ts';
import { createRun } from '../shared/sql/runs.ts';
import { parseCsv, waitFor } from '../scripts/chaos/checks.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { expireLease, jobRow } from './support/queue-fixtures.ts';
import { wrapSink } from './support/sink-wrapper.ts';

const db = useTestDatabase();

/** A local sink whose commit waits for `gate` (the stall between "all rows written" and "published"). */
function stallingSink(dir: string, gate: Promise<void>, onStall: () => void): ExportSink {
  return wrapSink(localDirectorySink(dir), (w) => ({
    async commit() {
      onStall();
      await gate;
      return w.commit();
    },
  }));
}

async function addContent(portalId: string, ownerId: string, from: number, count: number) {
  await db.sql`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at)
    select ${portalId}, ${ownerId}, 'site_pages', (900000 + g)::text, jsonb_build_object('name', 'Page ' || g, 'slug', 'p-' || g), now()
      from generate_series(${from}::int, ${from + count - 1}::int) g`;
}

describe('export publication under a lost lease', () => {
  it('the completed job\'s file is its own, even when a stale attempt publishes late', async () => {
    let result: { rows: number; bytes: number; location: string };
    const dir = await mkdtemp(path.join(tmpdir(), 'queue-export-fence-'));
    try {
      const { userId, portalId } = await createUserWithPortal(db.sql);
      await addContent(portalId, userId, 1, 50);
      const run = await createRun(db.sql, { portalId, requestedBy: userId, kind: 'export', contentTypes: ['site_pages'], leaseSeconds: 30 });
      const [{ id: jobId }] = (await db.sql`select id::text from public.jobs where run_id = ${run.runId}`) as unknown as [{ id: string }];
      const settings: WorkerRuntime['settings'] = { budgetMs: 60_000, lanes: 1, minStartMs: 0, rateLimit: { maxPer10s: 190 } };

      // Attempt 1 writes all 50 rows, then stalls just before publishing.
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let stalled = false;
      const stale = runWorkerInvocation({ sql: db.connect(2), log: silentLogger, settings, exportSink: stallingSink(dir, gate, () => (stalled = true)) }, 'export-stale');
      await waitFor(() => stalled, { what: 'attempt 1 to reach its commit' });

      // Its lease runs out meanwhile; content changes; attempt 2 exports 60 rows and completes the job.
      await expireLease(db.sql, jobId);
      await addContent(portalId, userId, 51, 10);
      const fresh = await runWorkerInvocation({ sql: db.connect(2), log: silentLogger, settings, exportSink: localDirectorySink(dir) }, 'export-fresh');
      expect(fresh.completed).toBe(1);
      const done = await jobRow(db.sql, jobId);
      expect(done).toMatchObject({ status: 'completed', worker_id: 'export-fresh', attempts: 2 });
      result = done.result as { rows: number; bytes: number; location: string };
      expect(result.rows).toBe(60);

      const file = localExportPath(dir, result.location);
      const published = await readFile(file);

      // Attempt 1 wakes up and tries to publish: its partial file is gone, so it fails and is fenced off ("lost")...
      release();
      const staleSummary = await stale;
      expect(staleSummary).toMatchObject({ completed: 0, lost: 1 });
      // ...and the file the completed job points at is still, byte for byte, the one it wrote.
      expect(await readFile(file)).toEqual(published);
      const records = parseCsv(published.toString('utf8'));
      expect(records.length - 1).toBe(result.rows);
      expect((await readdir(path.dirname(file))).filter((f) => f.includes('.partial-'))).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
