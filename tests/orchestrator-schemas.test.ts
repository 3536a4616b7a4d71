// The orchestrator's request schemas on their own (no database): user-supplied
// names refuse invisible Unicode format characters (category Cf) — zero-width
// spaces, the byte order mark, the soft hyphen, bidirectional controls, stray
// tags — in every name field, with a message that says what is wrong, while the
// few format characters that show (emoji ZWJ sequences, subdivision flags, Indic
// and Persian joiners) keep working.
import { describe, expect, it } from 'vitest';
import { completeInstallBody, connectPortalBody } from '../functions/orchestrator/schemas.ts';

const STATE = 'a'.repeat(43);

/** Every request body with a user-supplied name, given that name. */
const nameFields: [string, (name: string) => unknown, typeof connectPortalBody | typeof completeInstallBody][] = [
  ['connect_portal', (name) => ({ action: 'connect_portal', name, accessToken: 'pat-na1-0123' }), connectPortalBody],
  ['complete_hubspot_install', (name) => ({ action: 'complete_hubspot_install', state: STATE, code: 'abc', name }), completeInstallBody],
];

const INVISIBLE = [
  'Acme\u200BCorp', // zero-width space
  'Acme\u200B', // trailing (trim() keeps it)
  '\u200BAcme',
  'ad\u200Dmin', // zero-width joiner between Latin letters
  'ad\u200Cmin', // zero-width non-joiner between Latin letters
  'Acme\u2060', // word joiner
  'Ac\u00ADme', // soft hyphen
  'Ac\uFEFFme', // byte order mark inside (trim() only strips it at the ends)
  'a\u2062b', // invisible times
  'a\u180Eb', // Mongolian vowel separator
  'Acme\u{E0041}', // a stray tag character
  '\u200D👩', // a joiner that joins nothing
  '👩\u200D\u200D💻',
  'evil\u202Egnp.exe', // bidirectional override (Cf as well)
  'mark\u200F',
  'a\u061Cb',
];

const VISIBLE = [
  'Acme 👩‍💻', // ZWJ emoji sequence
  '👨‍👩‍👧‍👦 family',
  '❤️‍🔥',
  '👩🏽‍💻',
  '🏴\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F} Scotland', // subdivision flag (tag characters)
  'क्\u200Dष', // Devanagari half form after a virama
  'می\u200Cخواهم', // Persian zero-width non-joiner
  'Café עברית',
];

describe('user-supplied names', () => {
  for (const [action, body, schema] of nameFields) {
    it(`${action}: refuses invisible format characters (Unicode Cf) with a clear message on \`name\``, () => {
      for (const name of INVISIBLE) {
        const r = schema.safeParse(body(name));
        expect(r.success, JSON.stringify(name)).toBe(false);
        const issues = r.error!.issues;
        expect(issues.map((i) => i.path.join('.')), JSON.stringify(name)).toEqual(['name']);
        expect(issues[0]!.message).toMatch(/invisible formatting characters \(Unicode category Cf/);
      }
    });

    it(`${action}: accepts format characters that show (emoji sequences, flags, Indic and Persian joiners)`, () => {
      for (const name of VISIBLE) {
        const r = schema.safeParse(body(name));
        expect(r.success, `${JSON.stringify(name)}: ${JSON.stringify(r.error?.issues)}`).toBe(true);
        expect((r.data as { name: string }).name).toBe(name.normalize('NFC'));
      }
    });
  }

  it('a control character still gets its own message (one issue, not two)', () => {
    const r = connectPortalBody.safeParse(nameFields[0]![1]('a\u0000\u200Bb'));
    expect(r.error!.issues.map((i) => i.message)).toEqual(['must not contain control characters or line/paragraph separators']);
  });
});
