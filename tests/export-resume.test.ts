// Exports resume: an export told to stop after every stored chunk goes on over
// many claims and ends with the same bytes as a one-shot export; nothing is
// published before the end; an invocation killed between storing a chunk and
// checkpointing it (the upload ahead of the checkpoint), or whose lease is lost
// mid-chunk, still ends with the same file. Both sinks, real Postgres.
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyTo, processExportJob, type ExportCheckpoint } from '../functions/worker/export-job.ts';
import { type ExportSink } from '../functions/worker/export-sink.ts';
import { localDirectorySink } from '../functions/worker/local-sink.ts';
import { supabaseStorageSink } from '../functions/worker/tus-sink.ts';
import { localExportPath } from '../shared/export-location.ts';
import { PermanentJobError, type JobContext, type JobOutcome } from '../functions/worker/job-context.ts';
import { silentLogger } from '../shared/log.ts';
import { claimNextJob, type ClaimedJob } from '../shared/sql/jobs.ts';
import { createRun } from '../shared/sql/runs.ts';
import { parseCsv } from '../scripts/chaos/checks.ts';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';
import { expireLease, jobRow } from './support/queue-fixtures.ts';
import { wrapSink } from './support/sink-wrapper.ts';
import { startStorageStandIn, type StorageStandIn } from './support/storage-stand-in.ts';

const db = useTestDatabase();
const ITEMS = 240;
const PAGE_ROWS = 20;

let portal: { userId: string; portalId: string };
let storage: StorageStandIn;
let dir: string;

beforeAll(async () => {
  storage = await startStorageStandIn({ sql: db.sql });
  dir = await mkdtemp(path.join(tmpdir(), 'export-resume-'));
  const { userId, portalId } = await createUserWithPortal(db.sql);
  portal = { userId, portalId };
  // Items with everything CSV has to get right: commas, quotes, line breaks, formulas, unicode, nested JSON, nulls.
  await db.sql`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at)
    select ${portalId}, ${userId}, 'site_pages', (5000 + g)::text,
           jsonb_build_object(
             'name', case g % 5 when 0 then '=cmd|' || g when 1 then 'Page, "' || g || '"' when 2 then e'two\nlines ' || g
                                when 3 then 'ünïcödé ✓ ' || g else '-' || g end,
             'slug', 'p-' || g, 'url', 'https://example.test/p-' || g, 'state', 'PUBLISHED',
             'htmlTitle', repeat('t', g % 37), 'metaDescription', case when g % 4 = 0 then null else 'd' || g end,
             'language', 'en', 'domain', 'example.test', 'authorName', jsonb_build_object('a', jsonb_build_array(g, 'x')),
             'publishDate', g, 'created', true, 'body', repeat('b', 500)),
           timestamptz '2026-01-02 03:04:05.678+00' + g * interval '1 minute'
      from generate_series(1, ${ITEMS}::int) g`;
});
afterAll(async () => {
  await storage.close();
  await rm(dir, { recursive: true, force: true });
});

/** A JobContext as the invocation builds it, with the stop decision in the test's hands. */
function contextFor(job: ClaimedJob, sink: ExportSink, opts: { outOfBudget?: (chunk: number) => string | null; signal?: AbortSignal } = {}): { ctx: JobContext; chunks: () => number } {
  let asked = 0;
  const cpu0 = process.cpuUsage();
  const ctx: JobContext = {
    sql: db.sql,
    job,
    log: silentLogger,
    signal: opts.signal ?? new AbortController().signal,
    timeLeft: () => 60_000,
    outOfBudget: () => opts.outOfBudget?.(++asked) ?? null,
    cpuMs: () => {
      const c = process.cpuUsage(cpu0);
      return (c.user + c.system) / 1000;
    },
    hubspotForPortal: async () => {
      throw new Error('an export does not talk to HubSpot');
    },
    exportSink: sink,
    now: Date.now,
  };
  return { ctx, chunks: () => asked };
}

async function newExport(): Promise<string> {
  const run = await createRun(db.sql, { portalId: portal.portalId, requestedBy: portal.userId, kind: 'export', contentTypes: ['site_pages'] });
  const [row] = await db.sql`select id::text as id from public.jobs where run_id = ${run.runId}`;
  return row!.id as string;
}

async function claim(jobId: string, worker: string): Promise<ClaimedJob> {
  const job = await claimNextJob(db.sql, worker, ['export']);
  expect(job?.id).toBe(jobId);
  return job!;
}

async function checkpointOf(jobId: string): Promise<ExportCheckpoint | null> {
  return (await jobRow(db.sql, jobId)).checkpoint as ExportCheckpoint | null;
}

interface Result {
  rows: number;
  bytes: number;
  location: string;
  url: string | null;
}

/** Runs an export to completion in one claim. */
async function oneShot(sink: ExportSink): Promise<Result> {
  const jobId = await newExport();
  const { ctx } = contextFor(await claim(jobId, 'one-shot'), sink);
  expect(await processExportJob(ctx, { pageRows: PAGE_ROWS })).toEqual({ kind: 'completed' });
  return (await jobRow(db.sql, jobId)).result as Result;
}

/** Local files under the export directory that are not partial files (published ones), as locations (`exports/...`). */
async function publishedFiles(): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (!e.name.includes('.partial-')) out.push(path.relative(dir, p).split(path.sep).join('/'));
    }
  };
  await walk(dir);
  return out.sort();
}

/** The bytes of a local export, by its location. */
const localFile = (location: string) => readFile(localExportPath(dir, location));

/**
 * Runs claims of the job until it completes: each stops after `chunksPerClaim`
 * stored chunks. `check` runs after every claim that did not complete.
 */
async function untilDone(jobId: string, sink: () => ExportSink, chunksPerClaim: number, check: (cp: ExportCheckpoint) => Promise<void>) {
  const outcomes: JobOutcome[] = [];
  for (let claimNo = 1; claimNo <= 500; claimNo++) {
    const { ctx } = contextFor(await claim(jobId, `resume-${claimNo}`), sink(), {
      outOfBudget: (chunk) => (chunk >= chunksPerClaim ? 'test: stop after this chunk' : null),
    });
    const outcome = await processExportJob(ctx, { pageRows: PAGE_ROWS });
    outcomes.push(outcome);
    if (outcome.kind === 'completed') return outcomes;
    expect(outcome).toEqual({ kind: 'released', reason: 'test: stop after this chunk' });
    await check((await checkpointOf(jobId))!);
  }
  throw new Error('the export never completed');
}

describe('export resume, local directory sink', () => {
  it('an export created before its content was stored counts its rows when it starts: done and total agree at the end', async () => {
    const other = await createUserWithPortal(db.sql);
    const run = await createRun(db.sql, { portalId: other.portalId, requestedBy: other.userId, kind: 'export', contentTypes: ['blog_tags'] });
    const [created] = await db.sql`select id::text as id, progress_total from public.jobs where run_id = ${run.runId}`;
    expect(created!.progress_total).toBe(0); // counted at creation, before the fetch it waits for stored anything
    await db.sql`insert into public.hubspot_content (portal_id, owner_id, content_type, hubspot_id, data, hubspot_updated_at)
      select ${other.portalId}, ${other.userId}, 'blog_tags', g::text, jsonb_build_object('name', 'tag ' || g), now()
        from generate_series(1, 30) g`;
    const ownDir = await mkdtemp(path.join(tmpdir(), 'export-counts-')); // (the other tests count the files in `dir`)
    const { ctx } = contextFor(await claim(created!.id as string, 'counts'), localDirectorySink(ownDir));
    expect(await processExportJob(ctx, { pageRows: PAGE_ROWS })).toEqual({ kind: 'completed' });
    await rm(ownDir, { recursive: true, force: true });
    const done = await jobRow(db.sql, created!.id as string);
    expect([done.progress_done, done.progress_total, (done.result as Result).rows]).toEqual([30, 30, 30]);
  });

  it('an export stopped after every chunk resumes over many claims to the one-shot file; nothing is published before', async () => {
    const sinkOf = () => localDirectorySink(dir, { chunkBytes: 2048 });
    const reference = await oneShot(sinkOf());
    const referenceBytes = await localFile(reference.location);
    expect(reference.rows).toBe(ITEMS);
    const records = parseCsv(referenceBytes.toString('utf8'));
    expect(records.length).toBe(ITEMS + 1);
    const published = await publishedFiles();
    expect(published).toEqual([reference.location]);

    const jobId = await newExport();
    let last = -1;
    const outcomes = await untilDone(jobId, sinkOf, 1, async (cp) => {
      // Each claim moved the checkpoint on, and only the reference file is published.
      expect(cp.bytes).toBeGreaterThan(last);
      last = cp.bytes;
      expect(await publishedFiles()).toEqual(published);
    });
    expect(outcomes.length).toBeGreaterThan(10);
    const result = (await jobRow(db.sql, jobId)).result as Result;
    expect(result).toMatchObject({ rows: ITEMS, bytes: referenceBytes.byteLength, url: null });
    expect(await localFile(result.location)).toEqual(referenceBytes);
  });

  it('an invocation killed after storing a chunk but before its checkpoint resumes to the same file', async () => {
    const reference = await localFile((await oneShot(localDirectorySink(dir, { chunkBytes: 2048 }))).location);
    const jobId = await newExport();
    // Two chunks in, then the isolate dies right after the third is stored (before the checkpoint names it).
    const dying = killedAfterStoring(localDirectorySink(dir, { chunkBytes: 2048 }), 3);
    const { ctx } = contextFor(await claim(jobId, 'dies'), dying.sink);
    await expect(processExportJob(ctx, { pageRows: PAGE_ROWS })).rejects.toThrow('isolate killed');
    const cp = (await checkpointOf(jobId))!;
    expect(dying.storedAtDeath()).toBeGreaterThan(cp.bytes); // the file is ahead of its checkpoint
    await expireLease(db.sql, jobId);

    await untilDone(jobId, () => localDirectorySink(dir, { chunkBytes: 2048 }), 2, async () => {});
    const result = (await jobRow(db.sql, jobId)).result as Result;
    expect(result.location).toBe(`exports/${cp.path}`); // the same file was continued, not restarted
    expect(await localFile(result.location)).toEqual(reference);
  });

  it('a file published by an attempt whose completion was refused is taken back by the next holder: one final file', async () => {
    const reference = await localFile((await oneShot(localDirectorySink(dir))).location);
    const jobId = await newExport();
    const before = await publishedFiles();
    // The attempt writes and publishes the whole file, but its lease ends (beforeunload released the job,
    // or it expired) between publishing and completing: its completion is refused.
    // Small chunks, so its checkpoint has stored bytes and the next holder resumes rather than begins.
    const publishing = wrapSink(localDirectorySink(dir, { chunkBytes: 2048 }), (w) => ({
      async commit() {
        const file = await w.commit();
        await expireLease(db.sql, jobId);
        return file;
      },
    }));
    const { ctx } = contextFor(await claim(jobId, 'publishes-then-loses'), publishing);
    expect(await processExportJob(ctx, { pageRows: PAGE_ROWS })).toMatchObject({ kind: 'lost' });
    const cp = (await checkpointOf(jobId))!;
    expect(cp.bytes).toBeGreaterThan(0);
    expect((await publishedFiles()).filter((f) => !before.includes(f))).toEqual([`exports/${cp.path}`]);

    const next = contextFor(await claim(jobId, 'takes-over'), localDirectorySink(dir, { chunkBytes: 2048 }));
    expect(await processExportJob(next.ctx, { pageRows: PAGE_ROWS })).toEqual({ kind: 'completed' });
    const result = (await jobRow(db.sql, jobId)).result as Result;
    expect(result.location).toBe(`exports/${cp.path}`); // the published file was taken back, not a new one begun
    expect(await localFile(result.location)).toEqual(reference);
    expect((await publishedFiles()).filter((f) => !before.includes(f))).toEqual([result.location]);
  });

  it('a lost job lease stops the export at once; the next holder continues from the checkpoint', async () => {
    const reference = await localFile((await oneShot(localDirectorySink(dir, { chunkBytes: 2048 }))).location);
    const jobId = await newExport();
    const lease = new AbortController();
    let writes = 0;
    let writesAfterAbort = 0;
    const watching = wrapSink(localDirectorySink(dir, { chunkBytes: 2048 }), (w) => ({
      async write(chunk) {
        if (lease.signal.aborted) writesAfterAbort++;
        if (++writes === 12) lease.abort(new Error('job lease lost'));
        await w.write(chunk);
      },
    }));
    const { ctx } = contextFor(await claim(jobId, 'loses-lease'), watching, { signal: lease.signal });
    expect(await processExportJob(ctx, { pageRows: PAGE_ROWS })).toMatchObject({ kind: 'lost' });
    expect(writesAfterAbort).toBe(0);
    expect((await checkpointOf(jobId))!.rows).toBeGreaterThan(0);
    await expireLease(db.sql, jobId);
    await untilDone(jobId, () => localDirectorySink(dir, { chunkBytes: 2048 }), 1000, async () => {});
    expect(await localFile(((await jobRow(db.sql, jobId)).result as Result).location)).toEqual(reference);
  });
});

describe('export resume, Supabase Storage sink (loopback TUS server)', () => {
  const sinkOf = () => supabaseStorageSink({ supabaseUrl: storage.url, serviceKey: storage.serviceKey, chunkBytes: 4096 });
  let reference: Buffer;

  beforeAll(async () => {
    reference = await localFile((await oneShot(localDirectorySink(dir, { chunkBytes: 2048 }))).location);
  });

  it('stopped after every chunk, the upload resumes over many claims to the one-shot file, published only at the end', async () => {
    const jobId = await newExport();
    const before = storage.finished();
    let upload: string | null = null;
    const outcomes = await untilDone(jobId, sinkOf, 1, async (cp) => {
      upload ??= cp.upload;
      expect(cp.upload).toBe(upload); // one upload all along
      expect(storage.finished()).toEqual(before); // nothing published yet
    });
    expect(outcomes.length).toBeGreaterThan(5);
    const result = (await jobRow(db.sql, jobId)).result as Result;
    expect(result).toMatchObject({ rows: ITEMS, bytes: reference.byteLength });
    expect(storage.finished()).toEqual([...before, result.location].sort());
    expect(await storage.object(result.location)).toEqual(reference);
    expect(Buffer.from(await (await fetch(result.url!)).arrayBuffer())).toEqual(reference);
  });

  it('killed between an uploaded chunk and its checkpoint, the export resumes past what the server holds', async () => {
    const jobId = await newExport();
    const dying = killedAfterStoring(sinkOf(), 2);
    const { ctx } = contextFor(await claim(jobId, 'dies'), dying.sink);
    await expect(processExportJob(ctx, { pageRows: PAGE_ROWS })).rejects.toThrow('isolate killed');
    const cp = (await checkpointOf(jobId))!;
    expect(await storage.uploadOffset(cp.upload!)).toBeGreaterThan(cp.bytes); // the upload is ahead of its checkpoint
    await expireLease(db.sql, jobId);
    const patchesBefore = storage.requests.filter((r) => r.method === 'PATCH').length;

    await untilDone(jobId, sinkOf, 1, async (next) => expect(next.upload).toBe(cp.upload));
    const result = (await jobRow(db.sql, jobId)).result as Result;
    expect(result.location).toBe(`exports/${cp.path}`);
    expect(await storage.object(result.location)).toEqual(reference);
    // The bytes already uploaded were not sent again.
    const resent = storage.requests.filter((r) => r.method === 'PATCH').slice(patchesBefore);
    expect(Math.min(...resent.map((r) => r.offset!))).toBeGreaterThanOrEqual(dying.storedAtDeath());
  });

  it('an upload that vanished (expired) makes the export start a new file rather than fail forever', async () => {
    const jobId = await newExport();
    const { ctx } = contextFor(await claim(jobId, 'first'), sinkOf(), { outOfBudget: (n) => (n >= 2 ? 'stop' : null) });
    expect(await processExportJob(ctx, { pageRows: PAGE_ROWS })).toMatchObject({ kind: 'released' });
    const cp = (await checkpointOf(jobId))!;
    await db.sql`update public.jobs set checkpoint = jsonb_set(checkpoint, '{upload}', to_jsonb(${`${storage.url}/storage/v1/upload/resumable/expired-upload`}::text)) where id = ${jobId}`;
    await untilDone(jobId, sinkOf, 1000, async () => {});
    const result = (await jobRow(db.sql, jobId)).result as Result;
    expect(result.location).not.toBe(`exports/${cp.path}`);
    expect(await storage.object(result.location)).toEqual(reference);
  });
});

describe('export resume, Supabase Storage sink: what the real server refuses', () => {
  const sinkOf = () => supabaseStorageSink({ supabaseUrl: storage.url, serviceKey: storage.serviceKey, chunkBytes: 4096 });
  let reference: Buffer;
  beforeAll(async () => {
    reference = await localFile((await oneShot(localDirectorySink(dir, { chunkBytes: 2048 }))).location);
  });
  const objectRows = async (name: string) => (await db.sql`select count(*)::int as n from storage.objects where bucket_id = 'exports' and name = ${name}`)[0]!.n as number;

  it('a resumed upload found finished with other content is dropped for good: the object is deleted through the Storage API, none is left behind', async () => {
    const jobId = await newExport();
    const { ctx } = contextFor(await claim(jobId, 'first'), sinkOf(), { outOfBudget: (n) => (n >= 2 ? 'stop' : null) });
    expect(await processExportJob(ctx, { pageRows: PAGE_ROWS })).toMatchObject({ kind: 'released' });
    const cp = (await checkpointOf(jobId))!;
    // A stale attempt (which read other data) finished the upload with a length of its own: the object exists.
    const tus = { Authorization: `Bearer ${storage.serviceKey}`, apikey: storage.serviceKey, 'Tus-Resumable': '1.0.0' };
    const offset = await storage.uploadOffset(cp.upload!);
    const finish = await fetch(cp.upload!, {
      method: 'PATCH',
      headers: { ...tus, 'Content-Type': 'application/offset+octet-stream', 'Upload-Offset': String(offset), 'Upload-Length': String(offset + 5) },
      body: new TextEncoder().encode('stale'),
    });
    expect(finish.status).toBe(204);
    expect(storage.finished()).toContain(`exports/${cp.path}`);
    expect(await objectRows(cp.path)).toBe(1);

    // The next holder resumes it, finds it finished with fewer bytes than its file, and starts a new file.
    await untilDone(jobId, sinkOf, 1000, async () => {});
    const result = (await jobRow(db.sql, jobId)).result as Result;
    expect(result.location).not.toBe(`exports/${cp.path}`);
    expect(await storage.object(result.location)).toEqual(reference);
    expect(storage.finished()).not.toContain(`exports/${cp.path}`);
    expect(await objectRows(cp.path)).toBe(0); // deleted with its row, as Storage deletes
    expect(await objectRows(result.location.slice('exports/'.length))).toBe(1);
    // ... by the Storage API: deleting the row by SQL is refused (storage.protect_delete()).
    await expect(db.sql`delete from storage.objects where bucket_id = 'exports' and name = ${result.location.slice('exports/'.length)}`).rejects.toMatchObject({
      code: '42501',
      message: 'Direct deletion from storage tables is not allowed. Use the Storage API instead.',
    });
  });

  it('an export larger than the bucket\'s file_size_limit fails for good, the limit and how to raise it said, before the chunk crossing it is sent', async () => {
    const [{ limit }] = (await db.sql`select file_size_limit::int as limit from storage.buckets where id = 'exports'`) as unknown as [{ limit: number }];
    await db.sql`update storage.buckets set file_size_limit = ${10_000} where id = 'exports'`;
    try {
      const jobId = await newExport();
      const seen = storage.requests.length;
      const { ctx } = contextFor(await claim(jobId, 'too-large'), sinkOf());
      const failed = await processExportJob(ctx, { pageRows: PAGE_ROWS }).catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(PermanentJobError);
      expect((failed as Error).message).toMatch(/larger than the .*\(10000 bytes\) the "exports" Storage bucket accepts.*raises the bucket's file_size_limit/);
      const sent = storage.requests.slice(seen);
      const patches = sent.filter((r) => r.method === 'PATCH');
      expect(patches.length).toBeGreaterThan(0);
      expect(patches.every((p) => p.status === 204 && p.offset! + p.bytes! <= 10_000)).toBe(true); // none refused: none crossed
      expect(sent.at(-1)).toMatchObject({ method: 'DELETE', status: 204 }); // the upload is dropped, not kept for a resume
      const cp = (await checkpointOf(jobId))!;
      expect(storage.finished()).not.toContain(`exports/${cp.path}`);
      await db.sql`select public.stop_run(run_id) from public.jobs where id = ${jobId}`; // (the invocation would record the failure)
    } finally {
      await db.sql`update storage.buckets set file_size_limit = ${limit} where id = 'exports'`;
    }
  });
});

describe('COPY over one connection', () => {
  it('a copy bigger than the stream\'s buffer leaves the connection usable for the next query', async () => {
    // postgres.js pauses the socket when a COPY stream's buffer is full; when the copy ended in
    // the same read, the socket stayed paused and the connection's next query never returned.
    const one = db.connect(1);
    let total = 0;
    const counting = { write: async (chunk: Uint8Array) => void (total += chunk.byteLength), commit: async () => ({ location: '', bytes: 0 }), abort: async () => {} };
    for (let i = 0; i < 5; i++) {
      const n = await copyTo(one, counting, `copy (select g, repeat('x', 300) from generate_series(1, 1000) g) to stdout with (format csv)`, new AbortController().signal);
      expect(n).toBe(1000 * 302 + 2893);
      const [row] = await one`select ${i}::int as i`;
      expect(row!.i).toBe(i);
    }
    expect(total).toBe(5 * (1000 * 302 + 2893)); // "g," + 300 x + newline, g of 1 to 4 digits
  });

  it('a copy whose backend dies fails, and the pool goes on: the dead connection is not released into it', async () => {
    // Released after its close, the reserved connection went back to the pool with no socket, and the
    // next query's write threw from a timer: an uncaught error that ended the process (a chaos worker did).
    const pool = db.connect(2);
    let stalled: (() => void) | null = null;
    const slow = {
      // The first chunk waits (the COPY is in flight, its socket paused); the rest pass.
      write: () => (stalled ? Promise.resolve() : new Promise<void>((resolve) => (stalled = resolve))),
      commit: async () => ({ location: '', bytes: 0 }),
      abort: async () => {},
    };
    const copying = copyTo(pool, slow, `copy (select g, repeat('x', 300) from generate_series(1, 200000) g) to stdout with (format csv)`,
      new AbortController().signal).catch((e: unknown) => e);
    let pid: number | undefined;
    for (let i = 0; i < 100 && pid === undefined; i++) {
      const [row] = await db.sql`select pid from pg_stat_activity where query like 'copy (select g, repeat%' and pid <> pg_backend_pid()`;
      pid = row?.pid as number | undefined;
      if (pid === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(pid).toBeDefined();
    await db.sql`select pg_terminate_backend(${pid!})`;
    (stalled as (() => void) | null)?.();
    const failed = await copying;
    expect(failed).toMatchObject({ code: expect.stringMatching(/^(CONNECTION_CLOSED|ECONNRESET|57P01)$/) });
    for (let i = 0; i < 5; i++) {
      const [row] = await pool`select ${i}::int as i`;
      expect(row!.i).toBe(i);
    }
    await new Promise((resolve) => setTimeout(resolve, 100)); // any write left for a timer has run
  });
});

describe('export fencing', () => {
  it('export_header, export_page and export_rows serve only the holder', async () => {
    const jobId = await newExport();
    const job = await claim(jobId, 'holder');
    await expect(db.sql`select * from public.export_rows(${jobId}, ${Number(job.fencingToken) + 1}, 0, 1000000)`).rejects.toMatchObject({ code: '55000' });
    await expect(db.sql`select * from public.export_header(${jobId}, ${job.fencingToken})`).rejects.toMatchObject({ code: '22023' }); // no columns pinned yet
    const [page] = await db.sql`select * from public.export_page(${jobId}, ${Number(job.fencingToken) + 1}, 0, 10)`;
    expect(page).toMatchObject({ held: false, last_id: null });
    await expireLease(db.sql, jobId);
    const [late] = await db.sql`select * from public.export_page(${jobId}, ${job.fencingToken}, 0, 10)`;
    expect(late!.held).toBe(false);
    const { ctx } = contextFor(job, localDirectorySink(dir));
    expect(await processExportJob(ctx)).toMatchObject({ kind: 'lost' });
    await db.sql`select public.stop_run(run_id) from public.jobs where id = ${jobId}`;
  });
});

/**
 * A sink whose writers "die" (throw, and never touch the sink again) right
 * after the `n`th chunk is stored: the export cannot checkpoint that chunk.
 */
function killedAfterStoring(sink: ExportSink, n: number): { sink: ExportSink; storedAtDeath: () => number } {
  let storedAtDeath = -1;
  return {
    storedAtDeath: () => storedAtDeath,
    sink: {
      async open(p, o) {
        const w = await sink.open(p, o);
        let chunks = 0;
        let dead = false;
        return {
          get durableBytes() {
            return w.durableBytes;
          },
          upload: w.upload,
          close: async () => {},
          abort: async () => {},
          commit: async () => {
            throw new Error('isolate killed');
          },
          async write(chunk) {
            if (dead) throw new Error('isolate killed');
            const before = w.durableBytes;
            await w.write(chunk);
            if (w.durableBytes !== before && ++chunks === n) {
              dead = true;
              storedAtDeath = w.durableBytes!;
              throw new Error('isolate killed');
            }
          },
        };
      },
    },
  };
}
