// The one unhandled error vitest.config.ts lets pass: postgres.js's array-type
// query rejected when a new connection is cut off during it. A real cut shows
// the error it makes; the filter knows it, and nothing else.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { isPostgresTypeFetchFailure } from '../scripts/lib/known-upstream-errors.ts';
import { useTestDatabase } from './support/database.ts';

const run = promisify(execFile);
const db = useTestDatabase();

describe('known upstream errors', () => {
  it('a connection cut off during postgres.js\'s type fetch leaves that query rejected unhandled, and the filter knows it', async () => {
    const { stdout } = await run(path.resolve('node_modules/.bin/tsx'), [path.resolve('tests/fixtures/startup-cutoff.ts'), db.directUrl], { timeout: 60_000 });
    const { unhandled } = JSON.parse(stdout.trim().split('\n').pop()!) as { unhandled: { code: unknown; query: unknown }[] };
    expect(unhandled.length).toBeGreaterThan(0);
    expect(unhandled.every(isPostgresTypeFetchFailure)).toBe(true);
  });

  it('lets no other error pass', () => {
    expect(isPostgresTypeFetchFailure(new Error('boom'))).toBe(false);
    expect(isPostgresTypeFetchFailure(Object.assign(new Error('x'), { code: '57P01', query: 'select * from public.jobs' }))).toBe(false);
    expect(isPostgresTypeFetchFailure(Object.assign(new Error('x'), { query: 'select typarray from pg_catalog.pg_type' }))).toBe(false);
    expect(isPostgresTypeFetchFailure(null)).toBe(false);
  });
});
