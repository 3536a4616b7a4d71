// The runs list's keyset cursor: opaque to clients, checked on the way back in.
const CURSOR_AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** An opaque keyset cursor: the last run's created_at (microseconds, UTC) and id. */
export function encodeRunCursor(at: string, id: string): string {
  return btoa(`${at}|${id}`).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

/** The cursor's position, or null when it is not one of ours. */
export function decodeRunCursor(cursor: string): { at: string; id: string } | null {
  let text: string;
  try {
    text = atob(cursor.replaceAll('-', '+').replaceAll('_', '/'));
  } catch {
    return null;
  }
  const [at, id, ...rest] = text.split('|');
  if (rest.length || !at || !id || !CURSOR_AT.test(at) || !sameInstant(at) || !UUID.test(id)) return null;
  return { at, id };
}

/** True when `at` is a real instant (JavaScript reads it back to the same millisecond text). */
function sameInstant(at: string): boolean {
  const d = new Date(at);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 23) === at.slice(0, 23);
}
