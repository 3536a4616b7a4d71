// The pg_cron job a cron schema file (supabase/schemas/09xx_cron_*.sql) schedules: its
// name, schedule and command, read from the file as the migration runs it. A
// schedule given as private.cron_interval(N) is read as hosted's spelling
// ('N seconds', pg_cron 1.5 and later); older pg_cron gets every minute (decision 0069).
import { readFile } from 'node:fs/promises';

export interface CronFileJob {
  name: string;
  schedule: string;
  command: string;
}

export async function cronJobOfFile(file: string): Promise<CronFileJob> {
  const text = await readFile(file, 'utf8');
  const m = /cron\.schedule\(\s*'([^']+)',\s*(?:'([^']+)'|private\.cron_interval\((\d+)\)),\s*\$cmd\$([\s\S]*?)\$cmd\$\)/.exec(text);
  if (!m) throw new Error(`no cron.schedule(...) in ${file}`);
  return { name: m[1]!, schedule: m[2] ?? `${m[3]} seconds`, command: m[4]!.trim() };
}
