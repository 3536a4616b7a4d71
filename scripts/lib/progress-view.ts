// Live progress for `npm start`: one bar per job (done/total, items/s, ETA,
// retries) and a status line (run status, HubSpot request rate vs the limit).
// On a non-TTY it prints plain lines every few seconds instead.
import cliProgress from 'cli-progress';

export interface JobProgress {
  id: string;
  contentType: string;
  status: string;
  done: number;
  total: number | null;
  attempts: number;
}

export interface StatusLine {
  runStatus: string;
  requestsPer10s: number | null;
  limitPer10s: number;
  extra?: string;
}

export interface ProgressView {
  /** `force` prints even between plain-line intervals. */
  update(jobs: JobProgress[], status: StatusLine, force?: boolean): void;
  stop(): void;
}

/** Bars on a terminal, periodic plain lines elsewhere. */
export function createProgressView(title: string, opts: { interactive?: boolean; plainEveryMs?: number } = {}): ProgressView {
  const interactive = opts.interactive ?? Boolean(process.stdout.isTTY);
  const rates = new Map<string, { t: number; done: number; rate: number }>();
  const rateOf = (j: JobProgress) => {
    const now = Date.now();
    const prev = rates.get(j.id);
    let rate = prev?.rate ?? 0;
    if (prev && now - prev.t >= 900) {
      rate = prev.rate * 0.5 + ((j.done - prev.done) * 1000) / (now - prev.t) * 0.5;
      rates.set(j.id, { t: now, done: j.done, rate });
    } else if (!prev) rates.set(j.id, { t: now, done: j.done, rate: 0 });
    return rate;
  };
  const eta = (j: JobProgress, rate: number) =>
    j.status === 'completed' ? 'done' : j.total && rate >= 1 ? `${Math.max(0, Math.round((j.total - j.done) / rate))}s` : '-';
  const statusText = (s: StatusLine) =>
    `${title} | run: ${s.runStatus} | HubSpot: ${s.requestsPer10s ?? '-'}/${s.limitPer10s} req per 10 s${s.extra ? ` | ${s.extra}` : ''}`;

  if (!interactive) {
    let last = 0;
    let latest: [JobProgress[], StatusLine] | null = null;
    const view: ProgressView = {
      update(jobs, s, force = false) {
        latest = [jobs, s];
        const speeds = jobs.map((j) => rateOf(j));
        if (!force && Date.now() - last < (opts.plainEveryMs ?? 3000)) return;
        last = Date.now();
        console.log(statusText(s));
        jobs.forEach((j, i) =>
          console.log(`  ${j.contentType.padEnd(14)} ${j.status.padEnd(9)} ${String(j.done).padStart(6)}/${j.total ?? '?'} ` +
            `${speeds[i]!.toFixed(0).padStart(5)} items/s eta ${eta(j, speeds[i]!)} retries ${Math.max(0, j.attempts - 1)}`),
        );
      },
      stop() {
        if (latest) view.update(latest[0], latest[1], true);
      },
    };
    return view;
  }

  const multi = new cliProgress.MultiBar(
    {
      clearOnComplete: false,
      hideCursor: true,
      format: ' {type} [{bar}] {value}/{total} | {speed} items/s | ETA {eta_text} | {status} | retries {retries}',
      barsize: 30,
    },
    cliProgress.Presets.shades_classic,
  );
  const header = multi.create(1, 0, {}, { format: ' {text}' });
  const bars = new Map<string, cliProgress.SingleBar>();
  return {
    update(jobs, s) {
      header.update(0, { text: statusText(s) });
      for (const j of jobs) {
        const rate = rateOf(j);
        const payload = { type: j.contentType.padEnd(14), speed: rate.toFixed(0).padStart(5), eta_text: eta(j, rate).padStart(5), status: j.status.padEnd(9), retries: Math.max(0, j.attempts - 1) };
        const total = Math.max(j.total ?? j.done, j.done, 1);
        const bar = bars.get(j.id) ?? multi.create(total, 0, payload);
        bars.set(j.id, bar);
        bar.setTotal(total);
        bar.update(j.done, payload);
      }
    },
    stop() {
      multi.stop();
    },
  };
}
