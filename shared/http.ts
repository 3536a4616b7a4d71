// HTTP helpers shared by both functions: JSON responses with machine-readable
// error codes, CORS, and bounded body reading.
/**
 * Request headers a browser may send: everything supabase-js sends (its
 * `@supabase/supabase-js/cors` list, plus `x-region` from functions.invoke's
 * `region` option), checked against that list by a test.
 */
export const CORS_ALLOWED_HEADERS = [
  'authorization', 'x-client-info', 'apikey', 'content-type', 'x-retry-count',
  'traceparent', 'tracestate', 'baggage', 'x-region', 'x-supabase-api-version', 'prefer',
] as const;

export const CORS_HEADERS: Record<string, string> = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Headers': CORS_ALLOWED_HEADERS.join(', '),
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  // What browser code may read from a response: the rate limit's wait, a download's file name.
  'Access-Control-Expose-Headers': 'retry-after, content-disposition, content-length',
  'Access-Control-Max-Age': '86400',
};

/**
 * The answer to a CORS preflight: the fixed list above, plus whatever other
 * well-formed header names the browser asks for (supabase-js may add headers
 * before this list learns them; no cookies are ever accepted, so allowing a
 * header grants nothing).
 */
export function preflightResponse(req: Request): Response {
  const asked = (req.headers.get('access-control-request-headers') ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter((h) => /^[a-z0-9!#$%&'*+.^_`|~-]{1,64}$/.test(h))
    .slice(0, 32);
  const allowed = [...new Set<string>([...CORS_ALLOWED_HEADERS, ...asked])];
  return new Response(null, {
    status: 204,
    headers: { ...CORS_HEADERS, 'Access-Control-Allow-Headers': allowed.join(', '), Vary: 'Access-Control-Request-Headers' },
  });
}

/** Refuses a request whose body is not declared `application/json` (415), before reading it. */
export async function requireJsonContentType(req: Request): Promise<void> {
  const mediaType = (req.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (mediaType === 'application/json') return;
  await req.body?.cancel().catch(() => {});
  throw new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Send the request body as JSON with Content-Type: application/json.');
}

/** A JSON response (with CORS headers). */
export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'Content-Type': 'application/json; charset=utf-8', ...CORS_HEADERS, ...headers },
  });
}

/** An error response: `{ code, message, details? }`. */
export function errorResponse(status: number, code: string, message: string, details?: unknown, headers?: Record<string, string>): Response {
  return json(status, details === undefined ? { code, message } : { code, message, details }, headers);
}

/** An error whose status and code reach the caller as they are. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
    /** Extra response headers (e.g. Retry-After). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'HttpError';
  }

  toResponse(): Response {
    return errorResponse(this.status, this.code, this.message, this.details, { ...(this.status === 405 ? { Allow: 'GET, POST, OPTIONS' } : {}), ...this.headers });
  }
}

/**
 * How long a request body may take to arrive in full (ms): a body shorter than its
 * Content-Length, or one that stalls, is answered 408 then instead of holding the request.
 */
export const BODY_READ_TIMEOUT_MS = 10_000;

/** Reads a request body as JSON, refusing more than `maxBytes` (413), one not in within `timeoutMs` (408) and malformed JSON (400). */
export async function readJsonBody(req: Request, maxBytes: number, timeoutMs: number = BODY_READ_TIMEOUT_MS): Promise<unknown> {
  const bytes = await readBodyBytes(req, maxBytes, timeoutMs);
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  if (text.trim() === '') throw new HttpError(400, 'INVALID_BODY', 'Request body must be a JSON object.');
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'INVALID_BODY', 'Request body is not valid JSON.');
  }
}

/**
 * Reads a request body's bytes, refusing more than `maxBytes` (413
 * PAYLOAD_TOO_LARGE: a Content-Length over it before reading anything, or as
 * soon as the bytes read pass it) and one not in within `timeoutMs` (408).
 */
export async function readBodyBytes(req: Request, maxBytes: number, timeoutMs: number = BODY_READ_TIMEOUT_MS): Promise<Uint8Array> {
  const tooLarge = () => new HttpError(413, 'PAYLOAD_TOO_LARGE', `Request body must be at most ${maxBytes} bytes.`);
  const declared = Number(req.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    await req.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (req.body) {
    const reader = req.body.getReader();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeoutMs)));
    for (;;) {
      const next = await Promise.race([reader.read(), late]).catch((e) => {
        clearTimeout(timer);
        throw e;
      });
      if (next === 'late') {
        await reader.cancel().catch(() => {});
        throw new HttpError(408, 'REQUEST_TIMEOUT', `The request body did not arrive within ${timeoutMs / 1000} s: send all of it (as many bytes as Content-Length says).`);
      }
      const { done, value } = next;
      if (done) {
        clearTimeout(timer);
        break;
      }
      size += value.byteLength;
      if (size > maxBytes) {
        clearTimeout(timer);
        await reader.cancel().catch(() => {});
        throw tooLarge();
      }
      chunks.push(value);
    }
  }
  return concat(chunks, size);
}

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(size);
  let offset = 0;
  for (const c of chunks) {
    out.set(c, offset);
    offset += c.byteLength;
  }
  return out;
}

/** Compares two secrets in constant time (SHA-256 of both, then a full XOR scan). */
export async function secretsEqual(given: string, expected: string): Promise<boolean> {
  const enc = new TextEncoder();
  const [a, b] = await Promise.all([
    crypto.subtle.digest('SHA-256', enc.encode(given)),
    crypto.subtle.digest('SHA-256', enc.encode(expected)),
  ]);
  const x = new Uint8Array(a);
  const y = new Uint8Array(b);
  let diff = 0;
  for (let i = 0; i < x.length; i++) diff |= x[i]! ^ y[i]!;
  return diff === 0 && expected.length > 0;
}

/** The bearer token of a request, or null. */
export function bearerToken(req: Request): string | null {
  const h = req.headers.get('authorization');
  if (!h) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m ? m[1]! : null;
}
