// The local edge runtime's supervisor: a pool of isolates per function (each
// one a Deno child process running local/deno/serve-function.ts), held to
// hosted Supabase's limits the way supabase/edge-runtime's per-worker policy
// does (crates/base/src/worker/supervisor/strategy_per_worker.rs):
//
// - one active isolate per function takes every request, concurrent ones too;
//   it is replaced only once it retires or dies (isolateConcurrency can cap the
//   requests one isolate takes at once; more then start more isolates);
// - CPU is the isolate's JS thread CPU time (the process's main thread, read
//   from /proc), accumulated over the isolate's life from when it was ready:
//   at the soft limit it retires, at beforeunloadCpuPct of the hard limit it
//   gets beforeunload("cpu"), at the hard limit it is killed (CPUTime);
// - wall clock from the isolate's start: at 50% it retires, at
//   beforeunloadWallClockPct it gets beforeunload("wall_clock"), at 100% it
//   is killed (WallClockTime);
// - memory (V8 used heap + external, sampled inside the isolate, plus a V8
//   old-space cap): at 50% it may be dropped once idle, at
//   beforeunloadMemoryPct it gets beforeunload("memory"), at 100% it is
//   killed (Memory);
// - an isolate that is retired (or at 50% memory) and has no request in flight
//   and no EdgeRuntime.waitUntil promise pending is dropped early: it gets
//   beforeunload("early_drop") and ends (EarlyDrop).
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { LIMIT_REASONS, type EdgeLimits, type ShutdownReason } from './limits.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export interface IsolateInfo {
  id: string;
  pid: number | undefined;
  function: string;
  startedAt: number;
  cpuMs: number;
  requests: number;
  inFlight: number;
  pendingWaitUntil: number;
  memoryBytes: number;
  retired: boolean;
  state: IsolateState;
}

export interface FunctionStats {
  isolatesStarted: number;
  isolatesLive: number;
  bootFailures: number;
  requests: number;
  /** Requests whose isolate died under them (they got 546 or 500). */
  requestsCutOff: number;
  shutdowns: Partial<Record<ShutdownReason, number>>;
  /** Shutdowns by a limit (CPUTime, Memory, WallClockTime): the isolate was terminated, not drained. */
  hardKills: number;
  /** beforeunload events dispatched, by reason (cpu, memory, wall_clock, early_drop). */
  beforeunload: Record<string, number>;
  /** CPU ms per finished request (an isolate's CPU split evenly among its requests in flight), most recent last. */
  cpuMsPerRequest: number[];
  /** CPU ms per finished isolate, most recent last. */
  cpuMsPerIsolate: number[];
}

export interface ShutdownRecord {
  function: string;
  isolate: string;
  pid: number | undefined;
  reason: ShutdownReason;
  cpuMs: number;
  wallMs: number;
  requests: number;
  inFlight: number;
  pendingWaitUntil: number;
  memoryBytes: number;
}

type IsolateState = 'booting' | 'ready' | 'dropping' | 'terminating' | 'dead';

export interface SupervisorOptions {
  projectRoot: string;
  denoBin: string;
  limits: EdgeLimits;
  /** Where Deno finds the bootstrap, relative to projectRoot. */
  bootstrap?: string;
  /** How often CPU and the wall clock are checked (ms). */
  sampleMs?: number;
  /** Requests one isolate takes at once; more start another isolate. Default: no cap (hosted's per-worker policy). */
  isolateConcurrency?: number;
  /** How often an isolate samples its memory (ms). */
  memorySampleMs?: number;
  /** Environment of the Deno process that the function must not see (deleted before it is imported). */
  runtimeEnv: Record<string, string>;
  /** A line a function printed, or a runtime event line (JSON) about it. */
  onLine: (fn: string, line: string) => void;
  onShutdown?: (rec: ShutdownRecord) => void;
}

const MAX_SAMPLES = 20_000;
const BOOT_TIMEOUT_MS = 60_000;
const DROP_GRACE_MS = 2_000;

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** CPU ms of a process's main thread (where Deno runs JavaScript), or null if unreadable. */
export function mainThreadCpuMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // utime + stime
    return Number.isFinite(ticks) ? (ticks * 1000) / ticksPerSecond() : null;
  } catch {
    return null;
  }
}

export class BootError extends Error {}

interface RequestRecord {
  cpuMs: number;
}

export class Isolate {
  readonly id = randomUUID();
  readonly startedAt = Date.now();
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly exited: Promise<ShutdownReason>;
  port = 0;
  state: IsolateState = 'booting';
  retired = false;
  reason: ShutdownReason | undefined;
  cpuMs = 0;
  requests = 0;
  pending = 0;
  memoryBytes = 0;
  readonly inFlight = new Set<RequestRecord>();
  private cpuBase: number | undefined;
  private softReached = false;
  private cpuWarned = false;
  private wallHalf = false;
  private wallWarned = false;
  private memHalf = false;
  private drained = false;
  private readonly nonce = randomUUID().replaceAll('-', '');
  private readonly tail: string[] = [];
  /** Whether the isolate reported running out of V8 heap (on any line, not only the tail's). */
  private outOfMemory = false;
  private resolveReady!: () => void;
  private rejectReady!: (e: Error) => void;
  private timers: NodeJS.Timeout[] = [];

  constructor(
    readonly fn: FunctionPool,
    env: Record<string, string>,
  ) {
    const { sup } = fn;
    const limits = sup.opts.limits;
    this.ready = new Promise<void>((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    this.ready.catch(() => undefined);
    const fnEnv = { ...env, SB_EXECUTION_ID: this.id };
    const boot = {
      entry: fn.entry,
      nonce: this.nonce,
      memoryLimitBytes: limits.memoryLimitMb * 1024 * 1024,
      memoryBeforeunloadPct: limits.beforeunloadMemoryPct,
      memorySampleMs: sup.opts.memorySampleMs ?? 100,
      hide: Object.keys(sup.opts.runtimeEnv).filter((k) => !(k in fnEnv)),
    };
    const args = ['run', '-A', '--no-prompt', '--config', 'deno.json'];
    if (limits.memoryLimitMb > 0) args.push(`--v8-flags=--max-old-space-size=${Math.max(16, Math.round(limits.memoryLimitMb))}`);
    args.push(sup.opts.bootstrap ?? 'local/deno/serve-function.ts');
    this.child = spawn(sup.opts.denoBin, args, {
      cwd: sup.opts.projectRoot,
      env: { ...sup.opts.runtimeEnv, ...fnEnv, EDGE_ISOLATE_BOOT: JSON.stringify(boot) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stdin!.on('error', () => undefined);
    this.lines(this.child.stdout!, false);
    this.lines(this.child.stderr!, true);
    this.exited = new Promise<ShutdownReason>((resolve) => {
      // 'close', not 'exit': every line the isolate wrote is in before its shutdown is recorded.
      this.child.once('close', (code, signal) => resolve(this.finish(code, signal)));
      this.child.once('error', (e) => {
        this.tail.push(String(e));
        if (this.child.exitCode === null && this.child.signalCode === null && !this.child.pid) resolve(this.finish(1, null));
      });
    });
    this.timers.push(
      setTimeout(() => {
        if (this.state === 'booting') this.kill('BootFailure');
      }, BOOT_TIMEOUT_MS).unref(),
    );
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Takes new requests: booting or ready, and not retired. */
  accepting(): boolean {
    return (this.state === 'booting' || this.state === 'ready') && !this.retired;
  }

  live(): boolean {
    return this.state !== 'dead';
  }

  info(): IsolateInfo {
    return {
      id: this.id,
      pid: this.pid,
      function: this.fn.name,
      startedAt: this.startedAt,
      cpuMs: this.cpuMs,
      requests: this.requests,
      inFlight: this.inFlight.size,
      pendingWaitUntil: this.pending,
      memoryBytes: this.memoryBytes,
      retired: this.retired,
      state: this.state,
    };
  }

  begin(): RequestRecord {
    this.sample();
    const rec = { cpuMs: 0 };
    this.inFlight.add(rec);
    this.requests++;
    this.fn.stats.requests++;
    return rec;
  }

  end(rec: RequestRecord): void {
    if (!this.inFlight.has(rec)) return;
    this.sample();
    this.inFlight.delete(rec);
    push(this.fn.stats.cpuMsPerRequest, Math.round(rec.cpuMs * 10) / 10);
    this.check();
  }

  /** Reads the CPU clock and hands the CPU used since the last read to the requests in flight. */
  sample(): void {
    if (this.cpuBase === undefined || !this.pid || this.state === 'dead') return;
    const now = mainThreadCpuMs(this.pid);
    if (now === null) return;
    const cpu = now - this.cpuBase;
    const delta = cpu - this.cpuMs;
    if (delta <= 0) return;
    this.cpuMs = cpu;
    const n = this.inFlight.size;
    for (const rec of this.inFlight) rec.cpuMs += delta / n;
  }

  /** Applies the limits; called on every sample tick, request end and isolate message. */
  check(): void {
    if (this.state === 'dead' || this.state === 'booting' || this.reason) return;
    const limits = this.fn.sup.opts.limits;
    const cpuLimited = limits.cpuSoftLimitMs > 0 || limits.cpuHardLimitMs > 0;
    if (cpuLimited && this.cpuBase !== undefined) {
      if (limits.cpuHardLimitMs > 0 && this.cpuMs >= limits.cpuHardLimitMs) return this.kill('CPUTime');
      if (!this.softReached && limits.cpuSoftLimitMs > 0 && this.cpuMs >= limits.cpuSoftLimitMs) {
        this.softReached = true;
        this.retire();
      }
      if (!this.cpuWarned && limits.cpuHardLimitMs > 0 && this.cpuMs >= (limits.cpuHardLimitMs * limits.beforeunloadCpuPct) / 100) {
        this.cpuWarned = true;
        this.beforeunload('cpu');
      }
    }
    const wall = limits.wallClockLimitMs;
    if (wall > 0) {
      const age = Date.now() - this.startedAt;
      if (age >= wall) return this.kill('WallClockTime');
      if (!this.wallHalf && age >= wall / 2) {
        this.wallHalf = true;
        this.retire();
      }
      if (!this.wallWarned && age >= (wall * limits.beforeunloadWallClockPct) / 100) {
        this.wallWarned = true;
        this.beforeunload('wall_clock');
      }
    }
    if (limits.memoryLimitMb > 0) {
      const limit = limits.memoryLimitMb * 1024 * 1024;
      if (this.memoryBytes >= limit) return this.kill('Memory');
      this.memHalf = this.memoryBytes >= limit / 2;
    }
    if (this.state !== 'ready') return;
    if (this.retired && this.inFlight.size === 0 && !this.drained) this.drain();
    if ((this.retired || this.memHalf) && this.inFlight.size === 0 && this.pending === 0) this.drop();
  }

  private retire(): void {
    this.retired = true;
  }

  private send(msg: Record<string, unknown>): void {
    if (this.child.stdin?.writable) this.child.stdin.write(`${JSON.stringify(msg)}\n`);
  }

  private beforeunload(reason: string): void {
    this.send({ t: 'beforeunload', reason });
  }

  /** A retired isolate with no request left gets a "drain" event (its waitUntil work may still run). */
  private drain(): void {
    this.drained = true;
    this.send({ t: 'drain' });
  }

  /** Early drop: beforeunload("early_drop"), then the isolate ends itself (or is killed after a grace). */
  private drop(reason: ShutdownReason = 'EarlyDrop'): void {
    this.state = 'dropping';
    this.retired = true;
    this.reason ??= reason;
    this.send({ t: 'drop' });
    this.timers.push(setTimeout(() => this.child.kill('SIGKILL'), DROP_GRACE_MS).unref());
  }

  /** Ends the isolate now; the first reason given is the one recorded. */
  kill(reason: ShutdownReason, signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.state === 'dead') return;
    this.reason ??= reason;
    this.retired = true;
    if (this.state === 'booting') this.rejectReady(new BootError(`${this.fn.name}: isolate ended while booting (${reason})`));
    this.child.kill(signal);
  }

  /**
   * Runtime shutdown, as hosted treats a user worker on a termination request: it retires, gets
   * "drain", and once no request is in flight and no waitUntil promise pending (within graceMs)
   * beforeunload("early_drop") and its end; still busy at graceMs, it is killed. Reason: TerminationRequested.
   */
  async terminate(graceMs: number): Promise<void> {
    if (this.state === 'dead') return;
    if (this.state === 'booting' || this.state === 'dropping') {
      this.kill('TerminationRequested');
    } else {
      this.retired = true;
      this.state = 'terminating';
      this.reason ??= 'TerminationRequested';
      if (!this.drained) this.drain();
      const deadline = Date.now() + graceMs;
      while (Date.now() < deadline && this.live() && (this.inFlight.size > 0 || this.pending > 0)) await sleep(10);
      if (this.live() && this.inFlight.size === 0 && this.pending === 0) {
        this.drop('TerminationRequested');
        const dropDeadline = Date.now() + Math.min(500, Math.max(50, deadline - Date.now()));
        while (Date.now() < dropDeadline && this.live()) await sleep(10);
      }
      this.child.kill('SIGKILL');
    }
    await this.exited;
  }

  private lines(stream: NodeJS.ReadableStream, isStderr: boolean): void {
    let buf = '';
    const marker = `\x1e${this.nonce} `;
    stream.setEncoding?.('utf8');
    const flushLine = (line: string) => {
      if (isStderr && line.startsWith(marker)) {
        try {
          this.onMessage(JSON.parse(line.slice(marker.length)) as Record<string, unknown>);
        } catch {
          /* not ours after all */
        }
        return;
      }
      if (!line) return;
      // V8's fatal out-of-memory report is followed by a native stack trace that can push it out of the tail.
      if (/out of memory/i.test(line)) this.outOfMemory = true;
      this.tail.push(line);
      if (this.tail.length > 30) this.tail.shift();
      this.fn.sup.opts.onLine(this.fn.name, line);
    };
    stream.on('data', (chunk: string | Buffer) => {
      buf += chunk.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        flushLine(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
    });
    stream.on('end', () => {
      if (buf) flushLine(buf);
      buf = '';
    });
  }

  private onMessage(msg: Record<string, unknown>): void {
    switch (msg.t) {
      case 'ready':
        if (this.state !== 'booting') return;
        this.port = Number(msg.port);
        this.cpuBase = (this.pid && mainThreadCpuMs(this.pid)) ?? undefined;
        this.state = 'ready';
        this.fn.sup.event(this, { event: 'boot', boot_ms: Date.now() - this.startedAt });
        this.resolveReady();
        this.check();
        return;
      case 'pending':
        this.pending = Number(msg.n) || 0;
        this.check();
        return;
      case 'mem':
        this.memoryBytes = Number(msg.bytes) || 0;
        this.check();
        return;
      case 'beforeunload': {
        const reason = String(msg.reason);
        this.fn.stats.beforeunload[reason] = (this.fn.stats.beforeunload[reason] ?? 0) + 1;
        this.fn.sup.event(this, { event: 'beforeunload', reason });
        return;
      }
      case 'boot_error':
        this.reason ??= 'BootFailure';
        this.rejectReady(new BootError(`${this.fn.name}: ${String(msg.message)}`));
        return;
    }
  }

  private finish(code: number | null, signal: NodeJS.Signals | null): ShutdownReason {
    if (this.state === 'dead') return this.reason!;
    const wasBooting = this.state === 'booting';
    this.state = 'dead';
    for (const t of this.timers) clearTimeout(t);
    let reason = this.reason;
    if (!reason) {
      if (wasBooting) reason = 'BootFailure';
      else if (this.outOfMemory) reason = 'Memory';
      else if (code === 0) reason = 'EventLoopCompleted';
      else reason = 'UncaughtException';
    }
    this.reason = reason;
    if (wasBooting) {
      this.fn.stats.bootFailures++;
      this.rejectReady(new BootError(`${this.fn.name}: isolate exited while booting (code ${code}, signal ${signal}): ${this.tail.slice(-10).join('\n')}`));
    }
    this.fn.onIsolateExit(this);
    const rec: ShutdownRecord = {
      function: this.fn.name,
      isolate: this.id,
      pid: this.pid,
      reason,
      cpuMs: Math.round(this.cpuMs),
      wallMs: Date.now() - this.startedAt,
      requests: this.requests,
      inFlight: this.inFlight.size,
      pendingWaitUntil: this.pending,
      memoryBytes: this.memoryBytes,
    };
    const st = this.fn.stats;
    st.shutdowns[reason] = (st.shutdowns[reason] ?? 0) + 1;
    if (LIMIT_REASONS.includes(reason)) st.hardKills++;
    st.requestsCutOff += this.inFlight.size;
    if (!wasBooting) push(st.cpuMsPerIsolate, rec.cpuMs);
    this.fn.sup.event(this, {
      event: 'shutdown',
      reason,
      cpu_ms: rec.cpuMs,
      wall_ms: rec.wallMs,
      requests: rec.requests,
      in_flight: rec.inFlight,
      waituntil_pending: rec.pendingWaitUntil,
      memory_mb: Math.round((rec.memoryBytes / 1048576) * 10) / 10,
      ...(code !== null && code !== 0 ? { exit_code: code } : {}),
      ...(signal ? { signal } : {}),
    });
    this.fn.sup.opts.onShutdown?.(rec);
    return reason;
  }
}

export class FunctionPool {
  readonly isolates = new Set<Isolate>();
  readonly stats: FunctionStats = {
    isolatesStarted: 0,
    isolatesLive: 0,
    bootFailures: 0,
    requests: 0,
    requestsCutOff: 0,
    shutdowns: {},
    hardKills: 0,
    beforeunload: {},
    cpuMsPerRequest: [],
    cpuMsPerIsolate: [],
  };
  stopping = false;
  /** Requests waiting for an isolate to finish booting, by isolate (they count against its concurrency). */
  private readonly waiting = new Map<Isolate, number>();

  constructor(
    readonly sup: Supervisor,
    readonly name: string,
    /** The function's entrypoint, relative to the project root. */
    readonly entry: string,
    private readonly env: Record<string, string>,
    /** Requests one isolate takes at once (hosted's per-worker policy: no cap). */
    private readonly concurrency: number,
  ) {}

  /** The isolate the next request goes to (the newest one taking requests with room), if any. */
  current(): Isolate | undefined {
    let pick: Isolate | undefined;
    for (const iso of this.isolates) {
      if (iso.accepting() && iso.inFlight.size + (this.waiting.get(iso) ?? 0) < this.concurrency) pick = iso;
    }
    return pick;
  }

  private spawn(): Isolate {
    const iso = new Isolate(this, this.env);
    this.isolates.add(iso);
    this.stats.isolatesStarted++;
    this.stats.isolatesLive = this.isolates.size;
    this.sup.onActiveChange(this.name, iso.child);
    return iso;
  }

  /** An isolate that takes the request, started if need be; the request is counted in flight. */
  async acquire(): Promise<{ isolate: Isolate; request: RequestRecord }> {
    for (let attempt = 0; attempt < 10; attempt++) {
      if (this.stopping) throw new BootError(`${this.name}: the local edge runtime is stopping`);
      const iso = this.current() ?? this.spawn();
      this.waiting.set(iso, (this.waiting.get(iso) ?? 0) + 1);
      try {
        await iso.ready;
      } finally {
        const n = this.waiting.get(iso)! - 1;
        if (n > 0) this.waiting.set(iso, n);
        else this.waiting.delete(iso);
      }
      if (iso.accepting() && iso.state === 'ready') return { isolate: iso, request: iso.begin() };
    }
    throw new BootError(`${this.name}: no isolate took the request`);
  }

  /** Starts an isolate (if none is taking requests) and waits until it serves. */
  async warm(): Promise<Isolate> {
    if (this.stopping) throw new BootError(`${this.name}: the local edge runtime is stopping`);
    const iso = this.current() ?? this.spawn();
    await iso.ready;
    return iso;
  }

  onIsolateExit(iso: Isolate): void {
    this.isolates.delete(iso);
    this.waiting.delete(iso);
    this.stats.isolatesLive = this.isolates.size;
    this.sup.onActiveChange(this.name, this.current()?.child);
  }

  /** Kills every isolate of this function (reason Killed); the next request starts a new one. */
  async killAll(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const all = [...this.isolates];
    for (const iso of all) iso.kill('Killed', signal);
    await Promise.all(all.map((iso) => iso.exited));
  }
}

export class Supervisor {
  readonly pools = new Map<string, FunctionPool>();
  private readonly ticker: NodeJS.Timeout;
  readonly cpuMeasurable = process.platform === 'linux' && mainThreadCpuMs(process.pid) !== null;

  constructor(
    readonly opts: SupervisorOptions,
    /** Called when the process a function's next request goes to changes (for the `processes` map). */
    readonly onActiveChange: (fn: string, child: ChildProcess | undefined) => void = () => undefined,
  ) {
    this.ticker = setInterval(() => this.tick(), opts.sampleMs ?? 25);
    this.ticker.unref();
  }

  add(name: string, entry: string, env: Record<string, string>): FunctionPool {
    const pool = new FunctionPool(this, name, path.normalize(entry), env, this.opts.isolateConcurrency ?? Infinity);
    this.pools.set(name, pool);
    return pool;
  }

  private tick(): void {
    for (const pool of this.pools.values()) {
      for (const iso of pool.isolates) {
        iso.sample();
        iso.check();
      }
    }
  }

  /** A runtime event about an isolate, logged as one JSON line among the function's output. */
  event(iso: Isolate, fields: Record<string, unknown>): void {
    const line = JSON.stringify({ level: fields.event === 'shutdown' && LIMIT_REASONS.includes(fields.reason as ShutdownReason) ? 'error' : 'info', ...fields, function: iso.fn.name, isolate: iso.id, pid: iso.pid });
    this.opts.onLine(iso.fn.name, line);
  }

  async stop(graceMs: number): Promise<void> {
    clearInterval(this.ticker);
    const all: Isolate[] = [];
    for (const pool of this.pools.values()) {
      pool.stopping = true;
      all.push(...pool.isolates);
    }
    await Promise.all(all.map((iso) => iso.terminate(graceMs)));
  }
}

function push(arr: number[], v: number): void {
  arr.push(v);
  if (arr.length > MAX_SAMPLES) arr.splice(0, arr.length - MAX_SAMPLES);
}

