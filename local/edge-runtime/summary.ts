// One line per function from LocalFunctions.stats(): isolates, requests,
// shutdowns by reason, hard kills, beforeunload events and CPU per request
// (for `npm start`'s summary and the bench).
import type { FunctionStats } from './supervisor.ts';

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** e.g. "worker: 3 isolates, 41 requests; shutdowns EarlyDrop 2, CPUTime 1 (1 hard kill, 1 request cut off); beforeunload cpu 1; CPU/request p50 20 ms, p95 310 ms, max 1990 ms" */
export function summarizeEdgeStats(stats: Record<string, FunctionStats>): string[] {
  return Object.entries(stats).map(([name, s]) => {
    const shutdowns = Object.entries(s.shutdowns).map(([r, n]) => `${r} ${n}`).join(', ') || 'none';
    const bu = Object.entries(s.beforeunload).map(([r, n]) => `${r} ${n}`).join(', ');
    const cpu = [...s.cpuMsPerRequest].sort((a, b) => a - b);
    const cpuText = cpu.length
      ? `CPU/request p50 ${Math.round(quantile(cpu, 0.5))} ms, p95 ${Math.round(quantile(cpu, 0.95))} ms, max ${Math.round(cpu[cpu.length - 1]!)} ms`
      : 'no finished requests';
    const kills = s.hardKills || s.requestsCutOff ? ` (${s.hardKills} hard kill${s.hardKills === 1 ? '' : 's'}, ${s.requestsCutOff} request${s.requestsCutOff === 1 ? '' : 's'} cut off)` : '';
    return (
      `${name}: ${s.isolatesStarted} isolate${s.isolatesStarted === 1 ? '' : 's'}, ${s.requests} request${s.requests === 1 ? '' : 's'}; ` +
      `shutdowns ${shutdowns}${kills}${bu ? `; beforeunload ${bu}` : ''}; ${cpuText}`
    );
  });
}
