// Word lists and "tricky" strings used to build simulator content (unicode, CSV hazards).

import { pick, randomInt, type Random } from './prng.ts';

const WORDS = [
  'growth', 'inbound', 'pricing', 'platform', 'customer', 'journey', 'automation', 'report',
  'guide', 'webinar', 'launch', 'roadmap', 'playbook', 'strategy', 'checklist', 'template',
  'analytics', 'pipeline', 'onboarding', 'security', 'integration', 'workflow', 'campaign',
  'benchmark', 'story', 'update', 'release', 'café', 'naïve', 'résumé', 'Zürich', 'São Paulo',
] as const;

/** Values that break naive CSV writers / spreadsheet importers; used on a few items. */
export const TRICKY_VALUES = [
  '=HYPERLINK("http://evil.example","click")',
  '+cmd|" /C calc"!A0',
  'Pricing, plans & "enterprise" tiers',
  'Line one\nLine two, with comma\r\nLine three',
  '日本語のページ — 価格表',
  'Emoji launch 🚀🎉 (2024)',
  "O'Brien's \"quoted\" guide; semi;colons",
  '-10% off, today only',
  '@mention at start',
  'Tab\tseparated\tvalue',
] as const;

// A capitalised phrase of n random words.
export function phrase(random: Random, words: number): string {
  const parts: string[] = [];
  for (let i = 0; i < words; i++) parts.push(pick(random, WORDS));
  const text = parts.join(' ');
  return text.charAt(0).toUpperCase() + text.slice(1);
}

// URL-safe slug of a phrase ('' when nothing URL-safe is left).
export function slugBase(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/[^\w\s-]/g, '')
    .trim()
    .toLowerCase()
    .replace(/\s+/g, '-');
}

// URL-safe slug from a phrase plus a unique suffix.
export function slugify(text: string, suffix: number | string): string {
  return `${slugBase(text) || 'item'}-${suffix}`;
}

// A lowercase UUID-shaped id (HubSpot campaign GUIDs look like this).
export function guid(random: Random): string {
  const hex = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 16).toString(16)).join('');
  return `${hex(8)}-${hex(4)}-4${hex(3)}-${pick(random, ['8', '9', 'a', 'b'])}${hex(3)}-${hex(12)}`;
}

// Title for item number seq: every 23rd item gets a tricky value so exports see them.
export function title(random: Random, seq: number): string {
  if (seq % 23 === 7) return TRICKY_VALUES[Math.floor(seq / 23) % TRICKY_VALUES.length] ?? 'Tricky';
  return phrase(random, randomInt(random, 2, 5));
}

// A few paragraphs of HTML (kept short so realistic portals stay in memory comfortably).
export function htmlBody(random: Random, paragraphs: number): string {
  const out: string[] = [];
  for (let i = 0; i < paragraphs; i++) {
    out.push(`<p>${phrase(random, randomInt(random, 8, 18))}, "quoted" &amp; more.</p>`);
  }
  return out.join('\n');
}

// Person name for authors and HubDB rows.
export function personName(random: Random): string {
  const first = pick(random, ['Ana', 'Björn', 'Chloé', 'Dmitri', 'Eun-ji', 'Farah', 'Giulia', 'Hiro', 'Ivan', 'José', 'Zoë']);
  const last = pick(random, ['Smith', 'Müller', "O'Neil", 'García', 'Nakamura', 'Kowalski', 'Nguyễn', 'Ødegaard', 'Dubois']);
  return `${first} ${last}`;
}
