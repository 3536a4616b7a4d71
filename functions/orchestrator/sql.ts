// The orchestrator's own database calls (abuse limits, OAuth install states) and its run-list cursor.
import type { Sql } from '../../shared/db.ts';

/** Counts one write for the user: 0 = go; otherwise ms until the user may write again (nothing counted). */
export async function takeUserWrite(sql: Sql, userId: string): Promise<number> {
  const [row] = await sql`select public.take_user_write(${userId}) as wait_ms`;
  return Number(row?.wait_ms ?? 0);
}

/** Counts an already-made HubSpot request in the portal's shared budget. */
export async function recordHubSpotRequest(sql: Sql, hubspotPortalId: number): Promise<void> {
  await sql`select public.record_hubspot_request(${hubspotPortalId})`;
}

/** Records an install state (its SHA-256) for the user; returns when it expires. */
export async function createInstallState(sql: Sql, userId: string, stateHash: Uint8Array): Promise<Date> {
  const [row] = await sql`select public.create_oauth_install_state(${userId}, ${stateHash}) as expires_at`;
  return row!.expires_at as Date;
}

/** Consumes the user's install state: true once for their own unexpired state, false otherwise (nothing changed). */
export async function consumeInstallState(sql: Sql, userId: string, stateHash: Uint8Array): Promise<boolean> {
  const [row] = await sql`select public.consume_oauth_install_state(${userId}, ${stateHash}) as ok`;
  return row?.ok === true;
}

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
