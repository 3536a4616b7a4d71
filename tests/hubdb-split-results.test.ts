// splitResults: a HubDB sweep forwards the rows it keeps as HubSpot sent them,
// so a number's spelling (12.50, 1e3, an integer past 2^53) reaches Postgres untouched.
import { describe, expect, it } from 'vitest';
import { splitResults } from '../shared/hubspot/hubdb-rows.ts';

describe('splitResults', () => {
  it('returns each row of the top-level results array byte for byte, and the page without them', () => {
    const rows = [
      '{"id":"1","values":{"price":12.50,"big":12345678901234567890,"e":1e3},"updatedAt":"2025-01-01T00:00:00Z"}',
      '{ "id" : 2, "name": "a \\"results\\": [ ] } {", "values": { "nested": [{"results": [1]}] } }',
      '{"id":"3","values":{}}',
    ];
    const text = `{"total":3, "results" : [ ${rows.join(' ,\n')} ], "type":"STREAMING","paging":{"next":{"after":"c3"}}}`;
    const split = splitResults(text)!;
    expect(split.rows).toEqual(rows);
    expect(JSON.parse(split.envelope)).toEqual({ total: 3, results: [], type: 'STREAMING', paging: { next: { after: 'c3' } } });
    // What JSON.parse + JSON.stringify would have sent instead.
    expect(JSON.stringify(JSON.parse(rows[0]!))).not.toBe(rows[0]);
  });

  it('finds results after other keys, also a string value "results", and an empty array', () => {
    expect(splitResults('{"kind":"results","paging":{"results":[{"x":1}]},"results":[]}')).toEqual({
      rows: [], envelope: '{"kind":"results","paging":{"results":[{"x":1}]},"results":[]}',
    });
  });

  it('is null without a results array of objects', () => {
    for (const text of ['{"total":0}', '{"results":{"id":"1"}}', '{"results":null}', '{"results":[{"id":"1"},"2"]}', '{"results":[1]}', '{"results":[[{"id":"1"}]]}', '[{"results":[]}]']) {
      expect(splitResults(text), text).toBeNull();
    }
  });
});
