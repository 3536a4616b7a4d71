// Export files as the orchestrator hands them to their owners: from the local
// export directory (npm start, tests) or from the private Storage bucket
// (deployed), where every read also issues a fresh signed URL. Ownership is
// decided before these are called (RLS on the job row).
import { open, stat } from 'node:fs/promises';
import path from 'node:path';

export interface ExportFile {
  body: ReadableStream<Uint8Array>;
  /** Bytes, when known. */
  size?: number;
}

export interface ExportFiles {
  /** A fresh download URL for a stored file; null for files this store cannot sign (local files). */
  signedUrl(location: string): Promise<{ url: string; expiresAt: string } | null>;
  /** The file's bytes, or null when the file is not (or no longer) there. */
  open(location: string): Promise<ExportFile | null>;
}

const CHUNK = 64 * 1024;

/** Files under `rootDir` (the worker's EXPORT_DIR); anything outside it is never opened. */
export function localExportFiles(rootDir: string): ExportFiles {
  const root = path.resolve(rootDir);
  return {
    async signedUrl() {
      return null;
    },
    async open(location) {
      if (!path.isAbsolute(location)) return null;
      const file = path.resolve(location);
      if (!file.startsWith(root + path.sep)) return null;
      const info = await stat(file).catch(() => null);
      if (!info?.isFile()) return null;
      const handle = await open(file, 'r');
      let closed = false;
      const close = async () => {
        if (closed) return;
        closed = true;
        await handle.close().catch(() => {});
      };
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          try {
            const buf = new Uint8Array(CHUNK);
            const { bytesRead } = await handle.read(buf, 0, CHUNK, null);
            if (bytesRead === 0) {
              await close();
              controller.close();
            } else controller.enqueue(buf.subarray(0, bytesRead));
          } catch (e) {
            await close();
            controller.error(e);
          }
        },
        async cancel() {
          await close();
        },
      });
      return { body, size: info.size };
    },
  };
}

export interface StorageExportFilesOptions {
  supabaseUrl: string;
  serviceKey: string;
  /** How long a signed URL stays valid (default 3600 s). */
  expiresInSeconds?: number;
  fetch?: typeof fetch;
}

/**
 * Files in Supabase Storage, located as `<bucket>/<object path>` (what the
 * worker's Storage sink records). Signs with the service key:
 * `POST /storage/v1/object/sign/<bucket>/<path>` → `{signedURL}`.
 */
export function storageExportFiles(opts: StorageExportFilesOptions): ExportFiles {
  const base = `${opts.supabaseUrl.replace(/\/$/, '')}/storage/v1`;
  const doFetch = opts.fetch ?? fetch;
  const expiresIn = opts.expiresInSeconds ?? 3600;
  const sign = async (location: string) => {
    const m = /^([a-z0-9_-]+)\/(.+)$/i.exec(location);
    if (!m || location.startsWith('/') || m[2]!.split('/').some((s) => s === '..' || s === '.' || s === '')) return null;
    const objectPath = m[2]!.split('/').map(encodeURIComponent).join('/');
    const res = await doFetch(`${base}/object/sign/${m[1]}/${objectPath}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${opts.serviceKey}`, apikey: opts.serviceKey, 'Content-Type': 'application/json' },
      body: JSON.stringify({ expiresIn }),
    });
    if (res.status === 404 || res.status === 400) {
      await res.body?.cancel();
      return null;
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new Error(`Storage sign failed with HTTP ${res.status}`);
    }
    const signed = (await res.json()) as { signedURL?: unknown };
    if (typeof signed.signedURL !== 'string') throw new Error('Storage sign returned no signedURL');
    return { url: `${base}${signed.signedURL}`, expiresAt: new Date(Date.now() + expiresIn * 1000).toISOString() };
  };
  return {
    signedUrl: sign,
    async open(location) {
      const signed = await sign(location);
      if (!signed) return null;
      const res = await doFetch(signed.url);
      if (res.status === 404 || res.status === 400) {
        await res.body?.cancel();
        return null;
      }
      if (!res.ok || !res.body) throw new Error(`Storage download failed with HTTP ${res.status}`);
      const size = Number(res.headers.get('content-length') ?? NaN);
      return { body: res.body, size: Number.isFinite(size) ? size : undefined };
    },
  };
}
