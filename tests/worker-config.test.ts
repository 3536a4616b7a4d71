// The worker's lanes from its environment: WORKER_LANES (the lanes an
// invocation starts with), and WORKER_CONCURRENCY, its old name, still read
// while WORKER_LANES is unset, with one warning that names the new variable.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { workerHandlerFromEnv } from '../functions/worker/from-env.ts';
import { renamedVariablesIn, workerConfig } from '../shared/config.ts';
import { useTestDatabase } from './support/database.ts';

const db = useTestDatabase();
const SECRET = 'worker-secret-config-0123456789abcdef';
const base = { SUPABASE_DB_URL: 'postgres://x', WORKER_SECRET: SECRET, EXPORT_DIR: '/tmp' };

describe('WORKER_LANES and its old name WORKER_CONCURRENCY', () => {
  it('WORKER_LANES sets the lanes (default 2); the old name is read only while the new one is unset', () => {
    expect(workerConfig(base).WORKER_LANES).toBe(2);
    expect(workerConfig({ ...base, WORKER_LANES: '5' }).WORKER_LANES).toBe(5);
    expect(workerConfig({ ...base, WORKER_CONCURRENCY: '3' }).WORKER_LANES).toBe(3);
    expect(workerConfig({ ...base, WORKER_CONCURRENCY: '3', WORKER_LANES: '' }).WORKER_LANES).toBe(3);
    expect(workerConfig({ ...base, WORKER_CONCURRENCY: '3', WORKER_LANES: '5' }).WORKER_LANES).toBe(5);
    expect(renamedVariablesIn({ ...base, WORKER_CONCURRENCY: '3', WORKER_LANES: '5' }))
      .toEqual([{ variable: 'WORKER_CONCURRENCY', renamedTo: 'WORKER_LANES', used: false }]);
    expect(renamedVariablesIn({ ...base, WORKER_LANES: '5' })).toEqual([]);
  });

  it('an invalid value is reported under the name it was given by', () => {
    expect(() => workerConfig({ ...base, WORKER_CONCURRENCY: '99' })).toThrow(/variables: WORKER_CONCURRENCY$/);
    expect(() => workerConfig({ ...base, WORKER_LANES: '99' })).toThrow(/variables: WORKER_LANES$/);
  });

  /** A worker handler from `env` (on the test database) and the log records it wrote. */
  async function handlerFrom(env: Record<string, string>) {
    const lines: Record<string, unknown>[] = [];
    const exportDir = await mkdtemp(path.join(tmpdir(), 'queue-exports-'));
    const handler = workerHandlerFromEnv(
      { SUPABASE_DB_URL: db.url, WORKER_SECRET: SECRET, EXPORT_DIR: exportDir, WORKER_CONTINUE: '0', WORKER_LINGER_MS: '0', ...env },
      undefined, (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
    const invoke = async () => {
      const res = await handler(new Request('http://127.0.0.1/functions/v1/worker', {
        method: 'POST', headers: { Authorization: `Bearer ${SECRET}`, 'Content-Type': 'application/json' }, body: '{"source":"test"}',
      }));
      expect(res.status).toBe(200);
      return (await res.json()) as { lanes: number };
    };
    const renamed = () => lines.filter((l) => l.event === 'config_variable_renamed');
    return { invoke, renamed };
  }

  it('a deployment with only WORKER_CONCURRENCY runs its lanes, with one warning naming WORKER_LANES and no value', async () => {
    const { invoke, renamed } = await handlerFrom({ WORKER_CONCURRENCY: '3', WORKER_MAX_LANES: '3' });
    expect((await invoke()).lanes).toBe(3); // an empty queue: the lanes it starts with, none added
    expect((await invoke()).lanes).toBe(3);
    expect(renamed()).toHaveLength(1); // once per isolate, not per request
    const [warning] = renamed();
    expect(warning).toMatchObject({ level: 'warn', fn: 'worker', variable: 'WORKER_CONCURRENCY', renamed_to: 'WORKER_LANES', read: 'WORKER_CONCURRENCY' });
    expect(Object.keys(warning!).sort()).toEqual(['event', 'fn', 'level', 'read', 'renamed_to', 'ts', 'variable']);
  });

  it('WORKER_LANES wins over the old name (the warning says which is read); WORKER_LANES alone warns of nothing', async () => {
    const both = await handlerFrom({ WORKER_CONCURRENCY: '3', WORKER_LANES: '1', WORKER_MAX_LANES: '3' });
    expect((await both.invoke()).lanes).toBe(1);
    expect(both.renamed()).toMatchObject([{ variable: 'WORKER_CONCURRENCY', renamed_to: 'WORKER_LANES', read: 'WORKER_LANES' }]);

    const current = await handlerFrom({ WORKER_LANES: '3', WORKER_MAX_LANES: '3' });
    expect((await current.invoke()).lanes).toBe(3);
    expect(current.renamed()).toEqual([]);
  });
});
