// The project's API keys as hosted Supabase hands them to an edge function:
// the new keys as JSON maps (SUPABASE_PUBLISHABLE_KEYS, SUPABASE_SECRET_KEYS:
// {"default": "sb_publishable_…"} / {"default": "sb_secret_…"}) and the legacy
// JWT keys (SUPABASE_ANON_KEY, SUPABASE_SERVICE_ROLE_KEY). A project may have
// either kind or both; every name here is provided by Supabase, none is set by the user.

export interface KeyEnv {
  SUPABASE_PUBLISHABLE_KEYS?: string;
  SUPABASE_SECRET_KEYS?: string;
  SUPABASE_ANON_KEY?: string;
  SUPABASE_SERVICE_ROLE_KEY?: string;
}

export interface SupabaseKeys {
  /** A key that is safe to send as `apikey` on a user's behalf (Auth's /user): publishable, else anon. */
  clientKey?: string;
  /** The key for server-side calls (Storage, waking the worker): the default secret key, else service_role. */
  serverKey?: string;
  /** Every server key the project has (all secret keys and the service_role key): what a caller may prove it holds. */
  serverKeys: string[];
}

/**
 * Parses one of the JSON key maps. Accepts `{"name": "key", …}` (what hosted
 * sets) and, leniently, a bare array of keys or a single key. Returns the keys
 * with the one named `default` first. Throws naming the variable when it is not
 * usable JSON.
 */
export function parseKeyMap(name: string, value: string | undefined): string[] {
  if (value === undefined || value.trim() === '') return [];
  const text = value.trim();
  if (!text.startsWith('{') && !text.startsWith('[')) return [text];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`${name} is not valid JSON (expected {"default": "<key>"})`);
  }
  const entries: [string, unknown][] = Array.isArray(parsed)
    ? parsed.map((v, i) => [String(i), v])
    : parsed && typeof parsed === 'object'
      ? Object.entries(parsed as Record<string, unknown>)
      : [];
  const keys = entries
    .sort(([a], [b]) => (a === 'default' ? -1 : b === 'default' ? 1 : 0))
    .map(([, v]) => v)
    .filter((v): v is string => typeof v === 'string' && v.length > 0);
  return [...new Set(keys)];
}

const nonEmpty = (v: string | undefined) => (v && v.trim() !== '' ? v.trim() : undefined);

/** The project's keys from the environment Supabase gives the function. */
export function supabaseKeys(env: KeyEnv): SupabaseKeys {
  const publishable = parseKeyMap('SUPABASE_PUBLISHABLE_KEYS', env.SUPABASE_PUBLISHABLE_KEYS);
  const secret = parseKeyMap('SUPABASE_SECRET_KEYS', env.SUPABASE_SECRET_KEYS);
  const anon = nonEmpty(env.SUPABASE_ANON_KEY);
  const serviceRole = nonEmpty(env.SUPABASE_SERVICE_ROLE_KEY);
  const serverKeys = [...new Set([...secret, ...(serviceRole ? [serviceRole] : [])])];
  return {
    clientKey: publishable[0] ?? anon,
    serverKey: secret[0] ?? serviceRole,
    serverKeys,
  };
}
