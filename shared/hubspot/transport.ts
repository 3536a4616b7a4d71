// Runs one logical HubSpot request: rate-limit hook, timeout, bounded retries,
// error mapping, and every wait capped by the caller's deadline. A read (a GET,
// or a POST that only reads, such as a batch read) retries 5xx, timeouts and
// dropped connections; a write never does (it may have landed: its caller
// re-reads instead), and only a 429 (refused, nothing applied) is waited out.

import {
  DeadlineReached, HubSpotAuthError, HubSpotError, HubSpotMissingScopes, HubSpotRateLimitError, HubSpotRequestError,
  HubSpotTransientError,
} from './errors.ts';
import { redactSecrets } from '../redact.ts';
import type { RateLimitHeaders } from '../rate-limit-headers.ts';

export type { RateLimitHeaders };

/** An access token as handed out for one request; `version` identifies it when HubSpot refuses it. */
export interface AccessToken {
  token: string;
  /** Which stored token this is (null: a fixed token that cannot be renewed). */
  version: string | null;
}

/** Where the transport gets the token for each request (a fixed token, or a portal's stored and refreshed one). */
export interface AccessTokenSource {
  /** The token to send now (may wait for, or make, a refresh first). */
  current(signal?: AbortSignal): Promise<AccessToken>;
  /**
   * HubSpot answered 401 to `rejected`. Resolves true when another token is now
   * available (the request is tried once more), false when there is none (the
   * 401 is reported). May throw (e.g. HubSpotAccessRemoved when the refresh is refused).
   */
  renewAfterRejection(rejected: AccessToken, signal?: AbortSignal): Promise<boolean>;
}

/** A source that always hands out the same token and never renews it. */
export function fixedAccessToken(token: string): AccessTokenSource {
  const access: AccessToken = { token, version: null };
  return { current: async () => access, renewAfterRejection: async () => false };
}

export interface TransportOptions {
  /** Where each request's token comes from. */
  tokens: AccessTokenSource;
  beforeRequest?: () => Promise<void>;
  /** Called with every answer's rate-limit headers and awaited; a failure is ignored (the answer still counts). */
  onRateLimitHeaders?: (h: RateLimitHeaders) => unknown;
  requestTimeoutMs?: number;
  maxTransientRetries?: number;
  maxRateLimitRetries?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  /** Milliseconds the caller has left before its deadline; every wait is capped by it. */
  timeLeft?: () => number;
  /** Kept free after any HubSpot wait, for the caller to checkpoint and let go (default 1000). */
  deadlineMarginMs?: number;
  /** A request is not started with less time than this for it (default 500). */
  minRequestMs?: number;
}

/** What one HTTP exchange looks like to us (a fetch Response, as the official client's generic request returns). */
export interface HttpResponse {
  status: number;
  headers: { forEach(callback: (value: string, name: string) => void): void };
  text(): Promise<string>;
}

/** A request's method and JSON body, for anything but a GET. */
export interface RequestBody {
  method: 'POST' | 'PATCH';
  /** The JSON body as a value (the sender serialises it). */
  body: unknown;
}

/**
 * Sends one request (path relative to the API base, query string) with this
 * access token: a GET, or with `request` a POST or PATCH carrying a JSON body.
 */
export type SendFn = (
  path: string, qs: Record<string, string> | undefined, accessToken: string, request?: RequestBody,
) => Promise<HttpResponse>;

/** One request as the transport runs it. */
export interface HubSpotRequest {
  path: string;
  qs?: Record<string, string>;
  /** Absent: a GET. */
  request?: RequestBody;
}

/**
 * How a request's failures are handled. `write`: a 5xx, timeout or dropped
 * connection is thrown at once (HubSpotTransientError; the write may have been
 * applied), never retried. `answerRefusals`: a 4xx other than 401, 403 and 429
 * is answered (status and body) instead of thrown.
 */
export interface RequestPolicy {
  write: boolean;
  answerRefusals: boolean;
}

/** HubSpot's answer: a 2xx, or (with answerRefusals) a 4xx refusal; the body unparsed. */
export interface HubSpotAnswer {
  status: number;
  body: string;
  /** Its Date header: HubSpot's clock when it answered, to the second (absent when it sent none). */
  date?: string;
}

const GET_POLICY: RequestPolicy = { write: false, answerRefusals: false };

interface Exchange {
  status: number | null;
  headers: Record<string, string>;
  body: string | null;
}

const TIMEOUT = Symbol('timeout');
const NETWORK_CODES = /ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|EAI_AGAIN|ENOTFOUND|ECONNABORTED|UND_ERR|socket hang up|network|fetch failed|connection/i;

/** Executes requests with beforeRequest, a timeout, bounded 5xx/network (reads only) and 429 retries, error mapping and a deadline. */
export class Transport {
  private readonly timeoutMs: number;
  private readonly maxTransient: number;
  private readonly maxRateLimit: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly marginMs: number;
  private readonly minRequestMs: number;
  /** Every token this transport sent: none of them may appear in an error message. */
  private readonly sentTokens = new Set<string>();

  constructor(private readonly options: TransportOptions, private readonly sendFn: SendFn) {
    this.timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.maxTransient = options.maxTransientRetries ?? 4;
    this.maxRateLimit = options.maxRateLimitRetries ?? 4;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.random = options.random ?? Math.random;
    this.marginMs = options.deadlineMarginMs ?? 1_000;
    this.minRequestMs = options.minRequestMs ?? 500;
  }

  /**
   * GETs `path` until it succeeds (returns the 2xx body text, unparsed) or fails
   * for good. Each attempt is exactly one HTTP request. `signal` stops waiting at
   * once (its reason is thrown). A 401 makes the token source renew the token
   * once (a refreshed OAuth token) and the request is tried once more.
   */
  async get(path: string, qs?: Record<string, string>, signal?: AbortSignal): Promise<string> {
    return (await this.send(GET_POLICY, { path, qs }, signal)).body;
  }

  /**
   * Runs one request under `policy` until it is answered (a 2xx, or a 4xx
   * refusal when the policy answers them) or fails for good. As `get`, each
   * attempt is one HTTP request that took a grant (beforeRequest) first; a 401
   * renews the token once (HubSpot applied nothing). A write is never sent
   * again after a 5xx, a timeout or a dropped connection.
   */
  async send(policy: RequestPolicy, req: HubSpotRequest, signal?: AbortSignal): Promise<HubSpotAnswer> {
    let transientFailures = 0;
    let rateLimitHits = 0;
    let renewed = false;
    for (;;) {
      signal?.throwIfAborted();
      this.requestTimeoutMs(); // no grant is taken for a request that could not run
      if (this.options.beforeRequest) await this.options.beforeRequest();
      // After the grant: a token that came due during the wait for it is refreshed first.
      const access = await this.options.tokens.current(signal);
      this.sentTokens.add(access.token);
      const timeoutMs = this.requestTimeoutMs();
      const exchange: Exchange = { status: null, headers: {}, body: null };
      let failure: unknown;
      const sentAt = Date.now();
      try {
        await this.withTimeout(this.attempt(req, access.token, exchange), timeoutMs, signal);
        await this.reportHeaders(exchange.headers, sentAt);
        if (exchange.status !== null && exchange.status < 300) {
          return { status: exchange.status, body: exchange.body ?? '', ...(exchange.headers['date'] ? { date: exchange.headers['date'] } : {}) };
        }
      } catch (error) {
        signal?.throwIfAborted();
        failure = error;
        await this.reportHeaders(exchange.headers, sentAt);
      }
      const status = exchange.status ?? numericCode(failure);
      const body = parseBody(exchange.body);
      if (status === 401 && !renewed) {
        renewed = true;
        if (await this.options.tokens.renewAfterRejection(access, signal)) continue;
      }
      if (status === 403 && body.category === 'MISSING_SCOPES') throw new HubSpotMissingScopes(body.scopes, body.correlationId);
      if (status === 401 || status === 403) {
        throw new HubSpotAuthError(status, body.category, this.redact(body.message), body.correlationId);
      }
      if (status === 429) {
        const daily = body.policyName === 'DAILY' || exchange.headers['x-hubspot-ratelimit-daily-remaining'] === '0';
        const intervalMs = Number(exchange.headers['x-hubspot-ratelimit-interval-milliseconds']) || 10_000;
        if (daily) throw new HubSpotRateLimitError(msUntilNextUtcMidnight(), 'DAILY', body.correlationId);
        if (rateLimitHits++ < this.maxRateLimit) {
          await this.wait(this.rateLimitWait(rateLimitHits, intervalMs, exchange.headers['retry-after']), 'a HubSpot 429 (rate limit)', signal);
          continue;
        }
        throw new HubSpotRateLimitError(intervalMs, body.policyName ?? 'TEN_SECONDLY_ROLLING', body.correlationId);
      }
      const transientReason = this.transientReason(status, failure, timeoutMs);
      if (transientReason) {
        if (policy.write) throw new HubSpotTransientError(`${transientReason} (a write: not sent again)`, status, body.correlationId);
        if (transientFailures++ < this.maxTransient) {
          await this.wait(this.backoff(transientFailures), `a retry after ${transientReason}`, signal);
          continue;
        }
        throw new HubSpotTransientError(`${transientReason} (after ${transientFailures} attempts)`, status, body.correlationId);
      }
      if (status !== null && policy.answerRefusals && status >= 400 && status < 500) return { status, body: exchange.body ?? '' };
      if (status !== null) throw new HubSpotRequestError(status, body.category, this.redact(body.message), body.correlationId);
      if (failure instanceof HubSpotError || failure instanceof DeadlineReached) throw failure;
      throw new HubSpotError(`Unexpected HubSpot client failure: ${this.redact(errorMessage(failure))}`, false, { status: null });
    }
  }

  // Removes every access token we sent from any text we are about to put into an error.
  redact(text: string | null): string | null {
    return text ? redactSecrets(text, this.sentTokens) : text;
  }

  // One HTTP exchange: status, lower-cased headers and the body text (read inside the timeout).
  private async attempt(req: HubSpotRequest, accessToken: string, exchange: Exchange): Promise<void> {
    const response = await this.sendFn(req.path, req.qs, accessToken, req.request);
    const headers: Record<string, string> = {};
    response.headers.forEach((value, name) => {
      headers[name.toLowerCase()] = value;
    });
    exchange.headers = headers;
    // An error body that breaks off is still that error; a 2xx whose body breaks off is a failed attempt.
    exchange.body = response.status < 300 ? await response.text() : await response.text().catch(() => '');
    exchange.status = response.status; // set only once the exchange is complete
  }

  /** How long the next request may take: the configured timeout, capped by the deadline (throws when too short). */
  private requestTimeoutMs(): number {
    if (!this.options.timeLeft) return this.timeoutMs;
    const usable = this.options.timeLeft() - this.marginMs;
    if (usable < this.minRequestMs) {
      throw new DeadlineReached(`${Math.max(0, Math.round(usable))} ms left before the deadline: no time for a HubSpot request`);
    }
    return Math.min(this.timeoutMs, Math.floor(usable));
  }

  /** Sleeps `ms` unless that would leave no time for the request after it. */
  private async wait(ms: number, why: string, signal: AbortSignal | undefined): Promise<void> {
    if (this.options.timeLeft && this.options.timeLeft() - this.marginMs - ms < this.minRequestMs) {
      throw new DeadlineReached(`${why} asks for a ${ms} ms wait, which would end past the deadline`, ms);
    }
    if (!signal) return this.sleep(ms);
    signal.throwIfAborted();
    let onAbort = () => {};
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      await Promise.race([this.sleep(ms), aborted]);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  private transientReason(status: number | null, failure: unknown, timeoutMs: number): string | null {
    if (status !== null) return status >= 500 ? `HTTP ${status}` : null;
    if (failure === TIMEOUT) return `no response within ${timeoutMs} ms`;
    const name = failure instanceof Error ? failure.name : '';
    const text = `${name} ${errorMessage(failure)} ${String((failure as { code?: unknown })?.code ?? '')}`;
    if (name === 'FetchError' || name === 'AbortError' || NETWORK_CODES.test(text)) return 'connection failed';
    return null;
  }

  private backoff(attempt: number): number {
    const ceiling = Math.min(8_000, 250 * 2 ** (attempt - 1));
    return Math.round(ceiling / 2 + this.random() * (ceiling / 2));
  }

  private rateLimitWait(hit: number, intervalMs: number, retryAfter: string | undefined): number {
    const retryAfterMs = Number(retryAfter) * 1000;
    if (retryAfterMs > 0) return retryAfterMs;
    const base = Math.min(intervalMs, 1_000 * 2 ** (hit - 1));
    return Math.round(base + this.random() * Math.min(1_000, base / 2));
  }

  private async reportHeaders(h: Record<string, string>, sentAt: number): Promise<void> {
    if (!this.options.onRateLimitHeaders) return;
    const limits = parseRateLimitHeaders(h, sentAt, Date.now());
    if (!limits) return;
    try {
      await this.options.onRateLimitHeaders(limits);
    } catch {
      // Learning the limit is best effort: the answer itself is what the caller waits for.
    }
  }

  // The official client's generic request takes no abort signal: a timed-out request is left to finish on its own.
  private withTimeout<T>(promise: Promise<T>, timeoutMs: number, signal: AbortSignal | undefined): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort = () => {};
    const stop = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(TIMEOUT), timeoutMs);
      if (signal) {
        onAbort = () => reject(signal.reason);
        signal.addEventListener('abort', onAbort, { once: true });
      }
    });
    promise.catch(() => undefined); // a late failure after the timeout must not become unhandled
    return Promise.race([promise, stop]).finally(() => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    });
  }
}

/** The X-HubSpot-RateLimit-* headers of one answer (lower-cased names), or null when it has none that make sense. */
export function parseRateLimitHeaders(h: Record<string, string>, sentAt: number, answeredAt: number): RateLimitHeaders | null {
  const int = (name: string): number | null => {
    const raw = h[name];
    if (raw === undefined || raw.trim() === '') return null;
    const n = Number(raw);
    return Number.isSafeInteger(n) && n >= 0 ? n : null;
  };
  const max = int('x-hubspot-ratelimit-max');
  const remaining = int('x-hubspot-ratelimit-remaining');
  if (max === null || max < 1 || remaining === null) return null;
  const intervalMs = int('x-hubspot-ratelimit-interval-milliseconds') ?? 10_000;
  let daily = int('x-hubspot-ratelimit-daily');
  let dailyRemaining = int('x-hubspot-ratelimit-daily-remaining');
  if (daily === null || daily < 1 || dailyRemaining === null) daily = dailyRemaining = null;
  return { max, remaining: Math.min(remaining, max), intervalMs: Math.max(1, intervalMs), daily, dailyRemaining, sentAt, answeredAt };
}

interface ErrorBody {
  message: string | null;
  category: string | null;
  policyName: string | null;
  correlationId: string | null;
  /** MISSING_SCOPES: the scopes HubSpot says the call needs. */
  scopes: string[];
}

// HubSpot error JSON fields we use; tolerant of HTML/empty bodies (error bodies are small).
function parseBody(text: string | null): ErrorBody {
  const empty: ErrorBody = { message: null, category: null, policyName: null, correlationId: null, scopes: [] };
  if (!text) return empty;
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    const str = (v: unknown) => (typeof v === 'string' ? v : null);
    return {
      message: str(body['message']), category: str(body['category']), policyName: str(body['policyName']),
      correlationId: str(body['correlationId']), scopes: requiredScopes(body),
    };
  } catch {
    return empty;
  }
}

// The scopes a MISSING_SCOPES body names: `context.requiredScopes` / `requiredGranularScopes`,
// at the top level or in `errors[].context` (HubSpot uses both).
function requiredScopes(body: Record<string, unknown>): string[] {
  const contexts = [body['context'], ...(Array.isArray(body['errors']) ? body['errors'].map((e) => (e as Record<string, unknown> | null)?.['context']) : [])];
  const scopes = new Set<string>();
  for (const ctx of contexts) {
    if (!ctx || typeof ctx !== 'object') continue;
    for (const key of ['requiredScopes', 'requiredGranularScopes']) {
      const list = (ctx as Record<string, unknown>)[key];
      if (Array.isArray(list)) for (const s of list) if (typeof s === 'string' && /^[\w.-]{1,100}$/.test(s)) scopes.add(s);
    }
  }
  return [...scopes];
}

function numericCode(error: unknown): number | null {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' && code >= 100 && code < 600 ? code : null;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function msUntilNextUtcMidnight(now = Date.now()): number {
  const next = new Date(now);
  next.setUTCHours(24, 0, 0, 0);
  return Math.max(60_000, next.getTime() - now);
}
