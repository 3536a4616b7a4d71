// The schedules pg_cron accepts: five cron fields (minute hour day month
// weekday, in UTC as pg_cron's default cron.timezone) or '<n> seconds'. The
// local cron (cron.ts) asks which minute, or second, a job is due at.

export type CronSchedule =
  | { kind: 'fields'; minute: Set<number>; hour: Set<number>; day: Set<number>; month: Set<number>; weekday: Set<number>; dayAny: boolean; weekdayAny: boolean }
  | { kind: 'seconds'; every: number };

const FIELDS = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12 },
  { name: 'weekday', min: 0, max: 7 },
] as const;

function parseField(text: string, min: number, max: number, name: string): Set<number> {
  const out = new Set<number>();
  for (const part of text.split(',')) {
    const m = /^(\*|\d+(?:-\d+)?)(?:\/(\d+))?$/.exec(part);
    if (!m) throw new Error(`cron schedule: bad ${name} field '${text}'`);
    const step = m[2] === undefined ? 1 : Number(m[2]);
    let [lo, hi] = m[1] === '*' ? [min, max] : m[1]!.split('-').map(Number) as [number, number?];
    if (hi === undefined) hi = m[2] === undefined ? lo : max;
    if (step < 1 || lo < min || hi > max || lo > hi) throw new Error(`cron schedule: ${name} field '${text}' out of range ${min}-${max}`);
    for (let v = lo; v <= hi; v += step) out.add(v);
  }
  return out;
}

/** Parses a pg_cron schedule; throws on anything pg_cron would refuse (or this stand-in does not know). */
export function parseCronSchedule(schedule: string): CronSchedule {
  const seconds = /^\s*(\d+)\s+seconds?\s*$/i.exec(schedule);
  if (seconds) {
    const every = Number(seconds[1]);
    if (every < 1 || every > 59) throw new Error(`cron schedule: '${schedule}' (pg_cron takes 1-59 seconds)`);
    return { kind: 'seconds', every };
  }
  const parts = schedule.trim().split(/\s+/);
  if (parts.length !== 5) throw new Error(`cron schedule: '${schedule}' needs five fields or '<n> seconds'`);
  const [minute, hour, day, month, weekday] = parts.map((p, i) => parseField(p, FIELDS[i]!.min, FIELDS[i]!.max, FIELDS[i]!.name));
  if (weekday!.has(7)) weekday!.add(0); // 7 is Sunday too
  return { kind: 'fields', minute: minute!, hour: hour!, day: day!, month: month!, weekday: weekday!, dayAny: parts[2] === '*', weekdayAny: parts[4] === '*' };
}

/** Whether a five-field schedule fires in the UTC minute that contains `ms`. */
export function firesInMinute(s: Extract<CronSchedule, { kind: 'fields' }>, ms: number): boolean {
  const d = new Date(ms);
  if (!s.minute.has(d.getUTCMinutes()) || !s.hour.has(d.getUTCHours()) || !s.month.has(d.getUTCMonth() + 1)) return false;
  // Cron's rule: with both day of month and weekday restricted, either one matching is enough.
  const day = s.day.has(d.getUTCDate());
  const weekday = s.weekday.has(d.getUTCDay());
  if (s.dayAny && s.weekdayAny) return true;
  if (s.dayAny) return weekday;
  if (s.weekdayAny) return day;
  return day || weekday;
}
