// OAuth install states (supabase/schemas/0430-0432): recorded as sha256(state)
// for the user who started the install, consumed once.
import type { Sql } from '../db.ts';

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
