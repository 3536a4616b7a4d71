// What the figures were measured on.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface MachineInfo {
  nproc: number;
  cpuModel: string;
  totalMemoryMb: number;
  loadAverage: number[];
  node: string;
  postgres: string;
  platform: string;
  kernel: string;
}

export function machineInfo(postgresVersion: string): MachineInfo {
  let model = os.cpus()[0]?.model ?? 'unknown';
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8').split('\n').find((l) => l.startsWith('model name'));
    if (line) model = line.split(':').slice(1).join(':').trim();
  } catch {
    // not Linux: keep os.cpus()
  }
  return {
    nproc: os.availableParallelism(),
    cpuModel: model,
    totalMemoryMb: Math.round(os.totalmem() / 1024 / 1024),
    loadAverage: os.loadavg().map((v) => Math.round(v * 100) / 100),
    node: process.version,
    postgres: postgresVersion,
    platform: `${os.platform()} ${os.arch()}`,
    kernel: os.release(),
  };
}

/** The commit measured, and which files under test differ from it (others edit concurrently). */
export function gitState(cwd: string): { commit: string | null; modified: string[] } {
  try {
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd, encoding: 'utf8' }).trim();
    const status = execFileSync('git', ['status', '--porcelain', '--', 'supabase', 'shared', 'functions', 'scripts/lib', 'local'], { cwd, encoding: 'utf8' });
    return { commit, modified: status.split('\n').filter(Boolean).map((l) => l.slice(3)) };
  } catch {
    return { commit: null, modified: [] };
  }
}
