// Supabase Storage's error model: an error answer (JSON `{statusCode, code,
// error, message}`, or TUS's plain text) read by what it means: object
// missing, key refused, or something else. Used by the worker's TUS sink and
// the orchestrator's downloads.
/** A Storage error answer, read by what it means. */
export interface StorageErrorAnswer {
  httpStatus: number;
  /**
   * The status the error stands for: Storage answers most errors with HTTP 400
   * and the real one as the body's `statusCode` (a string: `"404"` for a
   * missing object, `"403"` for a refused key); else the HTTP status.
   */
  status: number;
  /** The body's `error` (`not_found`, `Unauthorized`, `Bucket not found`, ...), `code` (`NoSuchKey`, `AccessDenied`, ...) and `message`. */
  error: string | null;
  code: string | null;
  message: string | null;
}

/** Reads an error answer of Storage's (JSON `{statusCode, code, error, message}`, or TUS's plain text). */
export async function readStorageError(res: Response): Promise<StorageErrorAnswer> {
  const text = await res.text().catch(() => '');
  let body: Record<string, unknown> | null = null;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    // not JSON: TUS answers its own errors as text
  }
  const str = (v: unknown) => (typeof v === 'string' ? v.slice(0, 300) : typeof v === 'number' ? String(v) : null);
  const claimed = Number(str(body?.statusCode));
  return {
    httpStatus: res.status,
    status: Number.isInteger(claimed) && claimed >= 100 && claimed <= 599 ? claimed : res.status,
    error: str(body?.error),
    code: str(body?.code),
    message: body ? str(body.message) : text.trim().slice(0, 300) || null,
  };
}

/** The object is not there (Storage's NoSuchKey: statusCode "404", error "not_found"); a missing bucket is not this. */
export function storageObjectMissing(a: StorageErrorAnswer): boolean {
  return a.status === 404 && (a.error === 'not_found' || a.code === 'NoSuchKey');
}

/** Storage refused the key (bad, expired or rotated; or not a service key): statusCode "401"/"403", or HTTP 401/403 from the gateway. */
export function storageKeyRefused(a: StorageErrorAnswer): boolean {
  return a.status === 401 || a.status === 403 || a.httpStatus === 401 || a.httpStatus === 403;
}

/** For messages and logs (never the key: Storage does not echo it). */
export function describeStorageError(a: StorageErrorAnswer): string {
  const said = [a.error, a.message].filter(Boolean).join(': ');
  const what = `HTTP ${a.httpStatus}${a.status !== a.httpStatus ? ` (statusCode ${a.status})` : ''}${said ? ` ${said}` : ''}`;
  return storageKeyRefused(a) ? `${what}; Storage refused the service key (check SUPABASE_SECRET_KEYS / SUPABASE_SERVICE_ROLE_KEY)` : what;
}
