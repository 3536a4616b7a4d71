// A loopback stand-in for the parts of Supabase Storage the export sink uses:
// resumable uploads served by the real TUS server (@tus/server with its file
// store, the library Supabase Storage runs), plus a tiny object-signing route
// (POST /storage/v1/object/sign/<bucket>/<path>, and GET of the signed URL) for
// objects whose upload has finished. Requests must carry the service key.
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FileStore } from '@tus/file-store';
import { Server } from '@tus/server';

export interface StandInRequest {
  method: string;
  path: string;
  /** Upload-Offset of a PATCH. */
  offset?: number;
  /** Upload-Length sent with a request. */
  length?: number;
}

export interface StorageStandIn {
  /** Plays SUPABASE_URL. */
  url: string;
  serviceKey: string;
  /** Requests seen, in order. */
  requests: StandInRequest[];
  /** Finished objects, by `bucket/objectName`. */
  finished(): string[];
  /** The bytes of a finished object, or null. */
  object(bucketAndName: string): Promise<Buffer | null>;
  /** Bytes an unfinished upload holds (its URL as the sink got it). */
  uploadOffset(uploadUrl: string): Promise<number>;
  /** Called with each request before it is handled (a test may abort the client there). */
  onRequest: ((req: StandInRequest) => void) | null;
  close(): Promise<void>;
}

const TUS_PATH = '/storage/v1/upload/resumable';

export async function startStorageStandIn(): Promise<StorageStandIn> {
  const dir = await mkdtemp(path.join(tmpdir(), 'storage-stand-in-'));
  const serviceKey = `service-${randomUUID()}`;
  const finished = new Map<string, string>(); // bucket/objectName -> upload id
  const signed = new Map<string, string>(); // token -> bucket/objectName
  const store = new FileStore({ directory: dir });
  const tus = new Server({
    path: TUS_PATH,
    datastore: store,
    async onUploadFinish(_req, upload) {
      const md = upload.metadata ?? {};
      finished.set(`${md.bucketName}/${md.objectName}`, upload.id);
      return {};
    },
  });
  const requests: StandInRequest[] = [];
  const standIn: StorageStandIn = {
    url: '',
    serviceKey,
    requests,
    onRequest: null,
    finished: () => [...finished.keys()].sort(),
    async object(name) {
      const id = finished.get(name);
      return id ? await readFile(path.join(dir, id)) : null;
    },
    async uploadOffset(uploadUrl) {
      const id = decodeURIComponent(new URL(uploadUrl).pathname.slice(TUS_PATH.length + 1));
      return (await store.getUpload(id)).offset;
    },
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const num = (h: string) => (req.headers[h] === undefined ? undefined : Number(req.headers[h]));
    const seen: StandInRequest = { method: req.method ?? '', path: url.pathname, offset: num('upload-offset'), length: num('upload-length') };
    requests.push(seen);
    standIn.onRequest?.(seen);
    const signedGet = req.method === 'GET' && url.pathname.startsWith('/storage/v1/object/sign/');
    if (!signedGet && (req.headers.authorization !== `Bearer ${serviceKey}` || req.headers.apikey !== serviceKey)) {
      return json(res, 401, { error: 'unauthorized' });
    }
    if (url.pathname === TUS_PATH || url.pathname.startsWith(`${TUS_PATH}/`)) {
      void tus.handle(req, res);
      return;
    }
    const name = decodeURIComponent(url.pathname.slice('/storage/v1/object/sign/'.length));
    if (req.method === 'POST' && url.pathname.startsWith('/storage/v1/object/sign/')) {
      if (!finished.has(name)) return json(res, 400, { statusCode: '404', error: 'not_found', message: 'Object not found' });
      const token = randomUUID();
      signed.set(token, name);
      return json(res, 200, { signedURL: `/object/sign/${name.split('/').map(encodeURIComponent).join('/')}?token=${token}` });
    }
    if (signedGet) {
      const token = url.searchParams.get('token') ?? '';
      if (signed.get(token) !== name) return json(res, 400, { error: 'invalid signature' });
      void standIn.object(name).then((bytes) => {
        res.writeHead(200, { 'content-type': 'text/csv' });
        res.end(bytes);
      });
      return;
    }
    json(res, 404, { error: 'no such route' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  standIn.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return standIn;
}
