// What the orchestrator's routes are given (the handler's dependencies) and
// the contracts of its export store, signed links and OAuth app: a leaf that
// imports none of its siblings, so every route file can import it.
import type { VerifyUser } from '../../shared/auth.ts';
import type { AccessTokenSource, HubSpotContentClient, RateLimitHeaders } from '../../shared/hubspot/client.ts';
import type { PortalTokenSource } from '../../shared/hubspot/portal-tokens.ts';
import type { HubSpotAuthKind } from '../../shared/hubspot/request-budget.ts';
import type { Logger } from '../../shared/log.ts';
import type { Sql } from '../../shared/db.ts';
import type { TokenKeyring } from '../../shared/token-crypto.ts';

/** How a HubSpot client authenticates: a connected portal's token source (shared refresh), or a fixed token (a pasted private-app token). */
export type HubSpotAuth = { tokens: AccessTokenSource } | { accessToken: string };

export interface OrchestratorDeps {
  sql: Sql;
  log: Logger;
  verifyUser: VerifyUser;
  /**
   * A HubSpot client; `hubspotPortalId` set when the portal is known (shared
   * budget, its limits learned from the answers); `authKind` how it is
   * connected (default: a private app).
   */
  hubspotClient(
    auth: HubSpotAuth, hubspotPortalId: string | null, authKind?: HubSpotAuthKind,
    /** Also told every answer's rate-limit headers (a connect: the portal is known only from the answer). */
    onRateLimitHeaders?: (h: RateLimitHeaders) => void,
  ): HubSpotContentClient;
  /** A connected portal's tokens (refreshed once for every caller); null when it has none. Throws HubSpotAccessRemoved when disconnected. */
  portalTokens(portalId: string): Promise<PortalTokenSource | null>;
  /** Keys that encrypt stored tokens (HUBSPOT_TOKEN_KEYS); null: connecting answers 503 TOKEN_KEYS_MISSING. */
  tokenKeys: TokenKeyring | null;
  /** The HubSpot app for OAuth installs; without it the install actions answer 501 OAUTH_NOT_CONFIGURED. */
  oauthInstall?: OAuthInstallConfig;
  /** Wakes the worker after jobs were created (fire and forget). */
  wakeWorker(): void;
  maxBodyBytes: number;
  /** Where export files are read from (local directory or Storage); downloads answer 501 without it. */
  exportFiles?: ExportFiles;
  /** Signed links for files the store cannot sign itself (the local directory): `result.url` then works there too. */
  exportLinks?: ExportLinks;
}

export interface ExportFile {
  body: ReadableStream<Uint8Array>;
  /** Bytes, when known. */
  size?: number;
}

/** Where export files are read from (./export-files.ts: the local directory or Storage). */
export interface ExportFiles {
  /**
   * A fresh download URL for a stored file; null for files this store cannot
   * sign (local files). Throws ExportFileGoneError when the file is not
   * there, ExportStoreError when the store cannot say.
   */
  signedUrl(location: string): Promise<{ url: string; expiresAt: string } | null>;
  /** The file's bytes, or null when the file is not (or no longer) there. Throws ExportStoreError when the store cannot say. */
  open(location: string): Promise<ExportFile | null>;
  /** The location as answers show it: `<bucket>/<object path>`, never a path on the server. */
  shownLocation(location: string): string;
}

/** Signed links to export files (./export-links.ts). */
export interface ExportLinks {
  /** A link to the job's file valid for `ttlSeconds` (default 3600). */
  sign(jobId: string, ttlSeconds?: number): Promise<{ url: string; expiresAt: string }>;
  /** True when `expires` and `signature` are a current link's for this job. */
  verify(jobId: string, expires: string | null, signature: string | null): Promise<boolean>;
}

/** What an install needs; the install routes answer 501 without it. */
export interface OAuthInstallConfig {
  clientId: string;
  clientSecret: string;
  /** Where HubSpot sends the browser back (the frontend's page that completes the install). */
  redirectUri: string;
  /** Default DEFAULT_AUTHORIZE_URL. */
  authorizeUrl?: string;
  /** Base of HubSpot's token endpoint (/oauth/v3/token); default https://api.hubapi.com. */
  tokenBasePath?: string;
  requestTimeoutMs?: number;
  /** Stored with the tokens: refresh this long before expiry (HUBSPOT_TOKEN_REFRESH_MARGIN_SECONDS). */
  refreshMarginSeconds?: number;
}
