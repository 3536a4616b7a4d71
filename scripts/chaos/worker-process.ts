// Runs a queue worker as its own OS process (scripts/chaos/worker-main.ts),
// so a test can SIGKILL it mid-job or freeze it with SIGSTOP past its lease.
// The process is plain `node --import tsx` (no tsx wrapper process), so the
// signals reach the worker itself.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from '../../local/postgres.ts';
import { TEST_TOKEN_KEYS } from '../../local/test-token-keys.ts';

const MAIN = path.join(PROJECT_ROOT, 'scripts/chaos/worker-main.ts');

export interface WorkerProcessOptions {
  dbUrl: string;
  hubspotUrl: string;
  workerId: string;
  exportDir: string;
  budgetMs?: number;
  minStartMs?: number;
  lanes?: number;
  poolMax?: number;
  idleMs?: number;
  requestTimeoutMs?: number;
  ratePer10s?: number;
  /** Caps the HubSpot client's retry sleeps (ms). */
  maxSleepMs?: number;
  /** Exit when an invocation finds nothing to claim. */
  exitWhenIdle?: boolean;
  /** HUBSPOT_TOKEN_KEYS of the worker (default: the test keys, local/test-token-keys.ts). */
  tokenKeys?: string;
  /** Called with every JSON event line. */
  onEvent?: (e: WorkerEvent) => void;
}

/** One JSON line the worker printed. */
export interface WorkerEvent {
  event: string;
  level?: string;
  ts?: string;
  worker?: string;
  job_id?: string;
  fn?: string;
  fencing_token?: string;
  ok?: boolean;
  [k: string]: unknown;
}

export interface WorkerProcess {
  workerId: string;
  pid: number;
  child: ChildProcess;
  /** Every JSON event so far, in order. */
  events: WorkerEvent[];
  /** Lines that were not JSON (stderr, stray prints). */
  otherLines: string[];
  /** Resolves once the worker is connected and about to claim. */
  ready: Promise<void>;
  /** Resolves when the process exits. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  isAlive(): boolean;
  /** SIGKILL (no cleanup at all) and wait for the exit. */
  kill(): Promise<void>;
  /** SIGSTOP: the process freezes mid-whatever, connections stay open. */
  freeze(): void;
  /** SIGCONT. */
  resume(): void;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  /** Waits for an event matching `pred` (already seen ones count). */
  waitForEvent(pred: (e: WorkerEvent) => boolean, timeoutMs?: number): Promise<WorkerEvent>;
}

/** Spawns a worker process. */
export function spawnWorkerProcess(opts: WorkerProcessOptions): WorkerProcess {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    TMPDIR: process.env.TMPDIR ?? '/tmp',
    CHAOS_DB_URL: opts.dbUrl,
    CHAOS_HUBSPOT_URL: opts.hubspotUrl,
    CHAOS_WORKER_ID: opts.workerId,
    CHAOS_EXPORT_DIR: opts.exportDir,
    HUBSPOT_TOKEN_KEYS: opts.tokenKeys ?? TEST_TOKEN_KEYS,
  };
  const set = (k: string, v: number | boolean | undefined) => {
    if (v !== undefined) env[k] = typeof v === 'boolean' ? (v ? '1' : '0') : String(v);
  };
  set('CHAOS_BUDGET_MS', opts.budgetMs);
  set('CHAOS_MIN_START_MS', opts.minStartMs);
  set('CHAOS_LANES', opts.lanes);
  set('CHAOS_POOL_MAX', opts.poolMax);
  set('CHAOS_IDLE_MS', opts.idleMs);
  set('CHAOS_REQUEST_TIMEOUT_MS', opts.requestTimeoutMs);
  set('CHAOS_RATE_LIMIT_PER_10S', opts.ratePer10s);
  set('CHAOS_MAX_SLEEP_MS', opts.maxSleepMs);
  set('CHAOS_EXIT_WHEN_IDLE', opts.exitWhenIdle);

  // stdin stays a pipe: the worker exits when it closes, so a crashed parent never leaves workers behind.
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN], { cwd: PROJECT_ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const events: WorkerEvent[] = [];
  const otherLines: string[] = [];
  const waiters = new Set<{ pred: (e: WorkerEvent) => boolean; resolve: (e: WorkerEvent) => void }>();
  let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      exitInfo = { code, signal };
      resolve(exitInfo);
    });
  });

  const onLine = (line: string) => {
    if (!line.trim()) return;
    let e: WorkerEvent | null = null;
    if (line.startsWith('{')) {
      try {
        e = JSON.parse(line) as WorkerEvent;
      } catch {
        e = null;
      }
    }
    if (!e || typeof e.event !== 'string') {
      otherLines.push(line);
      if (otherLines.length > 2000) otherLines.shift();
      return;
    }
    events.push(e);
    opts.onEvent?.(e);
    for (const w of [...waiters]) {
      if (w.pred(e)) {
        waiters.delete(w);
        w.resolve(e);
      }
    }
  };
  const splitter = () => {
    let rest = '';
    return (buf: Buffer) => {
      rest += buf.toString('utf8');
      const lines = rest.split('\n');
      rest = lines.pop() ?? '';
      for (const l of lines) onLine(l);
    };
  };
  child.stdout!.on('data', splitter());
  child.stderr!.on('data', splitter());
  child.stdin!.on('error', () => {});

  const waitForEvent = (pred: (e: WorkerEvent) => boolean, timeoutMs = 30_000): Promise<WorkerEvent> => {
    const seen = events.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const w = {
        pred,
        resolve: (e: WorkerEvent) => {
          clearTimeout(timer);
          resolve(e);
        },
      };
      const timer = setTimeout(() => {
        waiters.delete(w);
        reject(new Error(`worker ${opts.workerId}: no matching event within ${timeoutMs} ms (exit: ${JSON.stringify(exitInfo)}; last: ${JSON.stringify(events.slice(-5))}; other: ${otherLines.slice(-5).join(' | ')})`));
      }, timeoutMs);
      waiters.add(w);
    });
  };

  const ready = waitForEvent((e) => e.event === 'chaos_worker_ready', 60_000).then(() => undefined);
  ready.catch(() => {}); // awaited by whoever needs it; never an unhandled rejection
  const isAlive = () => exitInfo === null;
  const signal = (s: NodeJS.Signals) => {
    if (isAlive()) child.kill(s);
  };
  return {
    workerId: opts.workerId,
    pid: child.pid!,
    child,
    events,
    otherLines,
    ready,
    exited,
    isAlive,
    async kill() {
      signal('SIGKILL');
      await exited;
    },
    freeze: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT'),
    async stop(graceMs = 3000) {
      if (!isAlive()) return;
      signal('SIGCONT');
      signal('SIGTERM');
      const timer = setTimeout(() => signal('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
    waitForEvent,
  };
}

/** The fenced queue calls a worker made for `jobId` (optionally only those after `sinceIndex` in its events). */
export function dbCalls(w: Pick<WorkerProcess, 'events'>, jobId?: string, sinceIndex = 0): WorkerEvent[] {
  return w.events.slice(sinceIndex).filter((e) => e.event === 'db_call' && (jobId === undefined || e.job_id === jobId));
}
