// No product file (functions/, shared/, web/) over 600 lines: a file that
// grows past it holds more than one concept and is split by concept.
import { describe, expect, it } from 'vitest';
import { productFiles, readSource } from './support/source-files.ts';

const MAX_LINES = 600;

describe('product file sizes', () => {
  it(`no file in functions/, shared/ or web/ has more than ${MAX_LINES} lines`, () => {
    const files = productFiles();
    expect(files.length).toBeGreaterThan(50);
    const over = files.map((f) => ({ f, lines: readSource(f).split('\n').length - 1 })).filter((x) => x.lines > MAX_LINES).map((x) => `${x.f}: ${x.lines}`);
    expect(over).toEqual([]);
  });
});
