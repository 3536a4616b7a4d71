// The local edge runtime (local/edge-runtime/, via startLocalFunctions) holds
// isolates to hosted Supabase's limits: CPU (soft: retire, 90% of hard:
// beforeunload "cpu", hard: kill with 546), wall clock per isolate (50%:
// retire, 90%: beforeunload "wall_clock", 100%: kill), memory (90%:
// beforeunload "memory", 100%: kill), EdgeRuntime.waitUntil keeping an
// isolate alive, isolate reuse, the environment hosted injects and nothing
// else, and the gateway's answers for what it does not serve. Small limits keep
// it quick; the fixture functions are in tests/fixtures/edge/.
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSigningKeys, startLocalFunctions, summarizeEdgeStats, type LimitOptions, type LocalFunctions, type StartFunctionsOptions } from '../local/supabase.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const keys = await createSigningKeys();

async function start(limits: LimitOptions, more: Partial<StartFunctionsOptions> = {}): Promise<LocalFunctions> {
  return startLocalFunctions({
    names: ['probe'],
    functionsDir: 'tests/fixtures/edge',
    jwks: keys.jwks,
    env: { MY_SECRET: 'probe-secret', SUPABASE_DB_URL: 'postgres://nobody@127.0.0.1:1/none' },
    limits,
    ...more,
  });
}

async function call(fns: LocalFunctions, route: string): Promise<{ status: number; code: string | null; body: any }> {
  const res = await fetch(`${fns.functionUrl('probe')}${route}`);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, code: res.headers.get('sb-error-code'), body };
}

async function until(what: string, cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** The runtime's JSON event lines about the function. */
function events(fns: LocalFunctions): Record<string, any>[] {
  return fns.output
    .get('probe')!
    .filter((l) => l.startsWith('{"level"'))
    .map((l) => JSON.parse(l) as Record<string, any>);
}

describe('CPU and memory limits, reuse, environment, gateway', () => {
  let fns: LocalFunctions;
  let storage: Server;
  beforeAll(async () => {
    // Another stand-in the gateway forwards a prefix to.
    storage = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(`storage saw ${req.url}`));
    await new Promise<void>((r) => storage.listen(0, '127.0.0.1', r));
    const port = (storage.address() as { port: number }).port;
    fns = await start(
      { cpuSoftLimitMs: 300, cpuHardLimitMs: 600, memoryLimitMb: 64, wallClockLimitMs: 0 },
      { upstreams: { '/storage/v1': `http://127.0.0.1:${port}` } },
    );
  });
  afterAll(async () => {
    await fns?.stop();
    storage?.close();
  });

  it('reuses one isolate for sequential and concurrent requests, and counts them', async () => {
    const a = await call(fns, '/info');
    const b = await call(fns, '/info');
    const [c, d] = await Promise.all([call(fns, '/sleep?ms=200'), call(fns, '/sleep?ms=200')]);
    expect(a.status).toBe(200);
    expect(a.body.executionId).toMatch(/^[0-9a-f-]{36}$/);
    for (const r of [b, c, d]) expect(r.body).toEqual(a.body);
    const s = fns.stats().probe!;
    expect(s.isolatesStarted).toBe(1);
    expect(s.requests).toBe(4);
    expect(fns.isolates('probe').map((i) => i.id)).toEqual([a.body.executionId]);
  });

  it('gives the function only the environment hosted injects plus its secrets', async () => {
    const r = await call(fns, '/env');
    expect(r.body.names).toEqual(['DENO_DEPLOYMENT_ID', 'MY_SECRET', 'SB_EXECUTION_ID', 'SB_REGION', 'SUPABASE_DB_URL', 'SUPABASE_JWKS', 'SUPABASE_URL']);
    expect(r.body.args).toEqual([]);
    expect(r.body.edgeRuntime).toBe('object');
    await expect(
      startLocalFunctions({ names: ['probe'], functionsDir: 'tests/fixtures/edge', jwks: keys.jwks, env: { SUPABASE_CUSTOM: 'x' } }),
    ).rejects.toThrow(/SUPABASE_CUSTOM is not allowed/);
  });

  it('a gateway port taken meanwhile fails with EADDRINUSE, and a start on another port then serves', async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    const port = (taken.address() as { port: number }).port;
    try {
      await expect(start({}, { port })).rejects.toMatchObject({ code: 'EADDRINUSE' });
      const again = await start({});
      expect((await call(again, '/env')).status).toBe(200);
      await again.stop();
    } finally {
      taken.close();
    }
  });

  it('answers 501 for project paths it does not serve, 404 for unknown functions, serves the JWKS and forwards mapped prefixes', async () => {
    for (const p of ['/rest/v1/runs', '/realtime/v1/websocket', '/auth/v1/user', '/graphql/v1']) {
      const res = await fetch(`${fns.url}${p}`);
      expect(res.status, p).toBe(501);
      const body = (await res.json()) as { code: string; message: string };
      expect(body.code).toBe('NOT_SERVED_LOCALLY');
      expect(body.message).toContain('supabase start');
    }
    const missing = await fetch(`${fns.url}/functions/v1/nope`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { code: string }).code).toBe('NOT_FOUND');
    const jwks = await fetch(`${fns.url}/auth/v1/.well-known/jwks.json`);
    expect(await jwks.json()).toEqual(keys.jwks);
    const forwarded = await fetch(`${fns.url}/storage/v1/object/exports/a.csv?x=1`);
    expect(await forwarded.text()).toBe('storage saw /storage/v1/object/exports/a.csv?x=1');
  });

  it('a request that stops on beforeunload("cpu") completes; the retired isolate is then dropped early', async () => {
    const before = fns.stats().probe!;
    const r = await call(fns, '/burn?react=1');
    expect(r.status).toBe(200);
    expect(r.body.stoppedBy).toBe('cpu');
    await until('the early drop', () => (fns.stats().probe!.shutdowns.EarlyDrop ?? 0) > (before.shutdowns.EarlyDrop ?? 0));
    const drop = events(fns).find((e) => e.event === 'shutdown' && e.isolate === r.body.executionId);
    expect(drop?.reason).toBe('EarlyDrop');
    expect(drop?.cpu_ms).toBeGreaterThanOrEqual(300);
    expect(fns.output.get('probe')).toContain('beforeunload early_drop');
    expect(fns.stats().probe!.hardKills).toBe(before.hardKills);
  });

  it('a request that keeps burning CPU gets beforeunload("cpu"), then the isolate is killed and it gets 546', async () => {
    const before = fns.stats().probe!;
    const r = await call(fns, '/burn');
    expect(r.status).toBe(546);
    expect(r.code).toBe('WORKER_RESOURCE_LIMIT');
    const s = fns.stats().probe!;
    expect(s.shutdowns.CPUTime).toBe(1);
    expect(s.hardKills).toBe(before.hardKills + 1);
    expect(s.beforeunload.cpu).toBe((before.beforeunload.cpu ?? 0) + 1);
    const kill = events(fns).find((e) => e.event === 'shutdown' && e.reason === 'CPUTime');
    expect(kill?.cpu_ms).toBeGreaterThanOrEqual(600);
    expect(kill?.in_flight).toBe(1);
    expect(summarizeEdgeStats(fns.stats())[0]).toMatch(/^probe: \d+ isolates, \d+ requests; shutdowns .*CPUTime 1 \(1 hard kill, 1 request cut off\); beforeunload .*cpu 2.*; CPU\/request p50/);
  });

  it('an isolate over its memory limit gets beforeunload("memory"), then is killed (546)', async () => {
    const r = await call(fns, '/hog');
    expect(r.status).toBe(546);
    const s = fns.stats().probe!;
    expect(s.shutdowns.Memory).toBe(1);
    expect(s.beforeunload.memory).toBe(1);
    expect(fns.output.get('probe')).toContain('beforeunload memory');
  });

  it('an isolate killed from outside fails its request with 500 WORKER_ERROR; the next request gets a fresh isolate', async () => {
    const first = await call(fns, '/info');
    const pending = call(fns, '/sleep?ms=5000');
    await until('the request in flight', () => fns.isolates('probe').some((i) => i.inFlight > 0));
    await fns.killIsolates('probe');
    const r = await pending;
    expect(r.status).toBe(500);
    expect(r.code).toBe('WORKER_ERROR');
    expect(fns.stats().probe!.shutdowns.Killed).toBe(1);
    const next = await call(fns, '/info');
    expect(next.status).toBe(200);
    expect(next.body.executionId).not.toBe(first.body.executionId);
  });

  it('a function that fails to start makes startLocalFunctions fail', async () => {
    await expect(start({}, { names: ['probe', 'boot-fail'] })).rejects.toThrow(/boot-fail/);
  });
});

describe('the V8 heap cap', () => {
  // Its own isolates with a CPU limit far above what filling 64 MB can take: on a loaded
  // machine V8's last-ditch collections near the cap cost hundreds of ms, and the 600 ms
  // limit above could then stop the isolate first (CPUTime, also 546).
  it('an isolate that fills its V8 heap without yielding is stopped by the heap cap (Memory, 546)', async () => {
    const fns = await start({ cpuSoftLimitMs: 20_000, cpuHardLimitMs: 40_000, memoryLimitMb: 64, wallClockLimitMs: 0 });
    try {
      const r = await call(fns, '/heap');
      expect(r.status).toBe(546);
      expect(fns.stats().probe!.shutdowns).toEqual({ Memory: 1 });
    } finally {
      await fns.stop();
    }
  });
});

describe('wall clock per isolate and EdgeRuntime.waitUntil', () => {
  let fns: LocalFunctions;
  beforeAll(async () => {
    fns = await start({ wallClockLimitMs: 3000 });
  });
  afterAll(async () => {
    await fns?.stop();
  });

  it('retires an isolate at half its wall clock, warns at 90% and kills it at 100% (546)', async () => {
    await fns.killIsolates('probe'); // a fresh isolate, started by the next request
    const long = call(fns, '/sleep?ms=20000');
    await until('the isolate', () => fns.isolates('probe').some((i) => i.inFlight > 0));
    const old = fns.isolates('probe').find((i) => i.inFlight > 0)!;
    await until('half the wall clock', () => Date.now() - old.startedAt > 1700);
    // A request landing on a retired isolate goes to a fresh one.
    const other = await call(fns, '/info');
    expect(other.status).toBe(200);
    expect(other.body.executionId).not.toBe(old.id);
    const r = await long;
    expect(r.status).toBe(546);
    expect(r.code).toBe('WORKER_RESOURCE_LIMIT');
    const mine = events(fns).filter((e) => e.isolate === old.id);
    expect(mine.filter((e) => e.event === 'beforeunload').map((e) => e.reason)).toEqual(['wall_clock']);
    const shutdown = mine.find((e) => e.event === 'shutdown');
    expect(shutdown?.reason).toBe('WallClockTime');
    expect(shutdown?.wall_ms).toBeGreaterThanOrEqual(3000);
    expect(fns.stats().probe!.shutdowns.WallClockTime).toBe(1);
  });

  it('keeps an isolate alive after the response until its waitUntil work settles', async () => {
    await fns.killIsolates('probe');
    // Retired at 1.5 s (half the wall clock), but the background work runs to 2.2 s.
    const r = await call(fns, '/bg?ms=2200&tag=after-retire');
    expect(r.status).toBe(200);
    await until('the shutdown', () => events(fns).some((e) => e.event === 'shutdown' && e.isolate === r.body.executionId));
    const lines = fns.output.get('probe')!;
    const done = lines.indexOf('bg done after-retire');
    const shutdownAt = lines.findIndex((l) => l.includes('"event":"shutdown"') && l.includes(r.body.executionId));
    expect(done).toBeGreaterThanOrEqual(0);
    expect(done).toBeLessThan(shutdownAt);
    expect(JSON.parse(lines[shutdownAt]!).reason).toBe('EarlyDrop');
  });
});

describe('isolateConcurrency', () => {
  it('caps the requests one isolate takes at once; the overflow starts another isolate', async () => {
    const fns = await start({}, { isolateConcurrency: 1 });
    try {
      const [a, b] = await Promise.all([call(fns, '/sleep?ms=300'), call(fns, '/sleep?ms=300')]);
      expect([a.status, b.status]).toEqual([200, 200]);
      expect(a.body.executionId).not.toBe(b.body.executionId);
      const c = await call(fns, '/info');
      expect([a.body.executionId, b.body.executionId]).toContain(c.body.executionId);
      expect(fns.stats().probe!.isolatesStarted).toBe(2);
    } finally {
      await fns.stop();
    }
  });
});
