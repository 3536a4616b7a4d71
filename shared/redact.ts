// The one place known secrets are taken out of text (error messages, log lines)
// before it leaves the process. A secret is matched as a whole token only: not
// inside a longer run of letters and digits, and never below MIN_SECRET_LENGTH
// characters (so short it is no secret worth matching, and matching it would
// mangle the text: a one-letter "token" would cut every word holding that letter).
// Besides the secret as it is, its forms inside a URL query string
// (percent-encoded, form-encoded) and inside a JSON string (escaped) are matched.

/** Secrets shorter than this are not matched. */
export const MIN_SECRET_LENGTH = 8;

/** What a secret is replaced with. */
export const REDACTED = '[redacted]';

const ALNUM = /[A-Za-z0-9]/;

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}

/** The secret as it may appear in text: as is, percent-encoded, form-encoded, JSON-escaped. */
function forms(secret: string): string[] {
  return [
    secret,
    encodeURIComponent(secret),
    new URLSearchParams({ s: secret }).toString().slice(2),
    JSON.stringify(secret).slice(1, -1),
  ];
}

/** A function that replaces every whole occurrence of any of `secrets` (of MIN_SECRET_LENGTH or more) by [redacted]. */
export function secretRedactor(secrets: Iterable<string | null | undefined>): (text: string) => string {
  const variants = new Set<string>();
  for (const s of secrets) {
    if (typeof s === 'string' && s.length >= MIN_SECRET_LENGTH) for (const f of forms(s)) variants.add(f);
  }
  if (variants.size === 0) return (text) => text;
  // Longest first, so a secret that contains another one is redacted whole.
  const alternatives = [...variants]
    .sort((a, b) => b.length - a.length)
    .map((v) => `${ALNUM.test(v[0]!) ? '(?<![A-Za-z0-9])' : ''}${escapeRegExp(v)}${ALNUM.test(v.at(-1)!) ? '(?![A-Za-z0-9])' : ''}`);
  const pattern = new RegExp(alternatives.join('|'), 'g');
  return (text) => text.replace(pattern, REDACTED);
}

/** Replaces every whole occurrence of any of `secrets` (of MIN_SECRET_LENGTH or more) in `text` by [redacted]. */
export function redactSecrets(text: string, secrets: Iterable<string | null | undefined>): string {
  return secretRedactor(secrets)(text);
}
