// Signed download links for export files kept in the local export directory
// (EXPORT_DIR: npm start, self-hosting), so `result.url` works as a plain link
// there too, as Storage's signed URLs do when deployed:
// `<SUPABASE_URL>/functions/v1/orchestrator/exports/<jobId>?expires=<unix s>&signature=<HMAC>`,
// valid one hour, for that job's file only, without an Authorization header.
// Signed with EXPORT_URL_KEY (HMAC-SHA256 over "<jobId>.<expires>").

import type { ExportLinks } from './deps.ts';

export type { ExportLinks };

const encoder = new TextEncoder();

function base64url(bytes: ArrayBuffer): string {
  return btoa(String.fromCharCode(...new Uint8Array(bytes))).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

/** Links under `orchestratorUrl` (e.g. http://127.0.0.1:54321/functions/v1/orchestrator) signed with `secret`. */
export function exportLinks(orchestratorUrl: string, secret: string): ExportLinks {
  if (secret.length < 16) throw new Error('EXPORT_URL_KEY must be at least 16 characters');
  const base = orchestratorUrl.replace(/\/+$/, '');
  const key = crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
  const mac = async (jobId: string, expires: number) => base64url(await crypto.subtle.sign('HMAC', await key, encoder.encode(`${jobId}.${expires}`)));
  return {
    async sign(jobId, ttlSeconds = 3600) {
      const expires = Math.floor(Date.now() / 1000) + ttlSeconds;
      return {
        url: `${base}/exports/${jobId}?expires=${expires}&signature=${await mac(jobId, expires)}`,
        expiresAt: new Date(expires * 1000).toISOString(),
      };
    },
    async verify(jobId, expires, signature) {
      if (!expires || !signature || !/^[0-9]{1,12}$/.test(expires) || !/^[A-Za-z0-9_-]{43}$/.test(signature)) return false;
      const at = Number(expires);
      if (at * 1000 <= Date.now()) return false;
      const expected = await mac(jobId, at);
      // Constant time over the (fixed-length) text.
      let diff = 0;
      for (let i = 0; i < expected.length; i++) diff |= expected.charCodeAt(i) ^ signature.charCodeAt(i);
      return diff === 0;
    },
  };
}
