// Runs one logical HubSpot call: rate-limit hook, timeout, bounded retries, and error mapping.

import {
  HubSpotAuthError, HubSpotError, HubSpotRateLimitError, HubSpotRequestError, HubSpotTransientError,
} from './errors.ts';

export interface RateLimitHeaders {
  max: number;
  remaining: number;
  intervalMs: number;
}

export interface TransportOptions {
  accessToken: string;
  beforeRequest?: () => Promise<void>;
  onRateLimitHeaders?: (h: RateLimitHeaders) => void;
  requestTimeoutMs?: number;
  maxTransientRetries?: number;
  maxRateLimitRetries?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

interface ProbeRequest {
  setHeaderParam(key: string, value: string): void;
}
interface ProbeResponse {
  httpStatusCode: number;
  headers: { [key: string]: string };
  body: { text(): Promise<string> };
}

/** Collects status, headers and (for errors) the raw body of the one HTTP exchange of an attempt. */
export class ResponseProbe {
  status: number | null = null;
  headers: Record<string, string> = {};
  errorBody: string | null = null;

  // Per-call options for the official client's *WithHttpInfo methods (a post-response middleware).
  options<Req extends ProbeRequest, Res extends ProbeResponse>() {
    return {
      middlewareMergeStrategy: 'replace' as const,
      middleware: [{
        pre: (context: Req): Promise<Req> => Promise.resolve(context),
        post: async (response: Res): Promise<Res> => {
          this.record(response.httpStatusCode, response.headers);
          if (response.httpStatusCode >= 300) {
            const text = await response.body.text().catch(() => '');
            this.errorBody = text;
            response.body.text = () => Promise.resolve(text); // the client reads the body again
          }
          return response;
        },
      }],
    };
  }

  // Stores status and lower-cased headers.
  record(status: number, headers: Record<string, string>): void {
    this.status = status;
    this.headers = {};
    for (const [k, v] of Object.entries(headers)) this.headers[k.toLowerCase()] = v;
  }
}

const TIMEOUT = Symbol('timeout');
const NETWORK_CODES = /ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|EAI_AGAIN|ENOTFOUND|ECONNABORTED|UND_ERR|socket hang up|network|fetch failed|connection/i;

/** Executes attempts with beforeRequest, a timeout, bounded 5xx/network and 429 retries, and error mapping. */
export class Transport {
  private readonly timeoutMs: number;
  private readonly maxTransient: number;
  private readonly maxRateLimit: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;

  constructor(private readonly options: TransportOptions) {
    this.timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.maxTransient = options.maxTransientRetries ?? 4;
    this.maxRateLimit = options.maxRateLimitRetries ?? 4;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.random = options.random ?? Math.random;
  }

  // Performs `attempt` (exactly one HTTP request each time) until it succeeds or fails for good.
  async run<T>(attempt: (probe: ResponseProbe) => Promise<T>): Promise<T> {
    let transientFailures = 0;
    let rateLimitHits = 0;
    for (;;) {
      if (this.options.beforeRequest) await this.options.beforeRequest();
      const probe = new ResponseProbe();
      let failure: unknown;
      try {
        const result = await this.withTimeout(attempt(probe));
        this.reportHeaders(probe);
        return result;
      } catch (error) {
        failure = error;
      }
      this.reportHeaders(probe);
      const status = probe.status ?? numericCode(failure);
      const body = parseBody(probe.errorBody);
      if (status === 401 || status === 403) {
        throw new HubSpotAuthError(status, body.category, this.redact(body.message), body.correlationId);
      }
      if (status === 429) {
        const daily = body.policyName === 'DAILY' || probe.headers['x-hubspot-ratelimit-daily-remaining'] === '0';
        const intervalMs = Number(probe.headers['x-hubspot-ratelimit-interval-milliseconds']) || 10_000;
        if (daily) throw new HubSpotRateLimitError(msUntilNextUtcMidnight(), 'DAILY', body.correlationId);
        if (rateLimitHits++ < this.maxRateLimit) {
          await this.sleep(this.rateLimitWait(rateLimitHits, intervalMs, probe.headers['retry-after']));
          continue;
        }
        throw new HubSpotRateLimitError(intervalMs, body.policyName ?? 'TEN_SECONDLY_ROLLING', body.correlationId);
      }
      const transientReason = this.transientReason(status, failure);
      if (transientReason) {
        if (transientFailures++ < this.maxTransient) {
          await this.sleep(this.backoff(transientFailures));
          continue;
        }
        throw new HubSpotTransientError(`${transientReason} (after ${transientFailures} attempts)`, status, body.correlationId);
      }
      if (status !== null) throw new HubSpotRequestError(status, body.category, this.redact(body.message), body.correlationId);
      if (failure instanceof HubSpotError) throw failure;
      throw new HubSpotError(`Unexpected HubSpot client failure: ${this.redact(errorMessage(failure))}`, false, { status: null });
    }
  }

  // Removes the access token from any text we are about to put into an error.
  redact(text: string | null): string | null {
    if (!text) return text;
    return this.options.accessToken ? text.split(this.options.accessToken).join('[redacted]') : text;
  }

  private transientReason(status: number | null, failure: unknown): string | null {
    if (status !== null) return status >= 500 ? `HTTP ${status}` : null;
    if (failure === TIMEOUT) return `no response within ${this.timeoutMs} ms`;
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

  private reportHeaders(probe: ResponseProbe): void {
    const h = probe.headers;
    if (!this.options.onRateLimitHeaders || h['x-hubspot-ratelimit-max'] === undefined) return;
    const max = Number(h['x-hubspot-ratelimit-max']);
    const remaining = Number(h['x-hubspot-ratelimit-remaining']);
    const intervalMs = Number(h['x-hubspot-ratelimit-interval-milliseconds'] ?? 10_000);
    if (Number.isFinite(max) && Number.isFinite(remaining)) this.options.onRateLimitHeaders({ max, remaining, intervalMs });
  }

  private withTimeout<T>(promise: Promise<T>): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(TIMEOUT), this.timeoutMs);
    });
    promise.catch(() => undefined); // a late failure after the timeout must not become unhandled
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
  }
}

interface ErrorBody {
  message: string | null;
  category: string | null;
  policyName: string | null;
  correlationId: string | null;
}

// HubSpot error JSON fields we use; tolerant of HTML/empty bodies.
function parseBody(text: string | null): ErrorBody {
  const empty: ErrorBody = { message: null, category: null, policyName: null, correlationId: null };
  if (!text) return empty;
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    const str = (v: unknown) => (typeof v === 'string' ? v : null);
    return { message: str(body['message']), category: str(body['category']), policyName: str(body['policyName']), correlationId: str(body['correlationId']) };
  } catch {
    return empty;
  }
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
