// The HubSpot OAuth install end to end over HTTP: both functions under real
// Deno in the local edge runtime, configured with an app registered in the
// simulator; the install flow as a frontend runs it (start, HubSpot's authorize
// page, the redirect, complete), then a fetch by the worker with the installed
// portal's sealed tokens.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installThroughSimulator, startLocalSystem, type LocalSystem } from '../local/system.ts';
import { createUser, useTestDatabase } from './support/database.ts';
import { writeCounts } from './support/orchestrator-harness.ts';

const db = useTestDatabase();
const HUB_ID = 778_001;
let sys: LocalSystem;

beforeAll(async () => {
  sys = await startLocalSystem(db.url, { oauth: true });
  sys.sim.addPortal({ portalId: HUB_ID, token: 'pat-e2e-oauth-unused', sizes: { site_pages: 30, blog_posts: 12, hubdb_tables: 1, hubdb_rows: 9 } });
}, 120_000);
afterAll(async () => {
  await sys?.stop();
});

async function signedIn() {
  const userId = await createUser(db.sql);
  return { userId, jwt: await sys.keys.signUserToken(userId) };
}

async function untilRunFinished(jwt: string, runId: string) {
  for (let i = 0; i < 60; i++) {
    await sys.invokeWorker();
    const res = await fetch(`${sys.functions.functionUrl('orchestrator')}?runId=${runId}`, { headers: { Authorization: `Bearer ${jwt}` } });
    const body = (await res.json()) as { run: { status: string; finishedAt: string | null } };
    if (body.run.finishedAt) return body;
  }
  throw new Error('run did not finish');
}

describe('HubSpot OAuth install under Deno', () => {
  it('installs the app in a portal, connects it to the user, and the worker fetches with its tokens', async () => {
    const { userId, jwt } = await signedIn();
    const orchestratorUrl = sys.functions.functionUrl('orchestrator');
    const installed = await installThroughSimulator({ sim: sys.sim, orchestratorUrl, userJwt: jwt, hubspotPortalId: HUB_ID, name: 'Installed' });
    expect(installed.status, JSON.stringify(installed.body)).toBe(201);
    expect(installed.body).toEqual({ portalId: expect.any(String), hubspotPortalId: HUB_ID, name: 'Installed' });
    const [portal] = await db.sql`select owner_id, auth_kind from public.portals where id = ${installed.body.portalId}`;
    expect({ ...portal }).toEqual({ owner_id: userId, auth_kind: 'oauth' });
    expect(sys.sim.oauthLog().filter((e) => e.grantType === 'authorization_code').map((e) => e.outcome)).toEqual(['ok']);

    const created = await fetch(orchestratorUrl, {
      method: 'POST',
      headers: { Authorization: `Bearer ${jwt}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ portalId: installed.body.portalId, contentTypes: ['site_pages', 'blog_posts', 'hubdb_rows'] }),
    });
    expect(created.status).toBe(201);
    const done = await untilRunFinished(jwt, ((await created.json()) as { runId: string }).runId);
    expect(done.run.status).toBe('completed');
    const [{ n }] = (await db.sql`select count(*)::int as n from public.hubspot_content where portal_id = ${installed.body.portalId}`) as unknown as [{ n: number }];
    expect(n).toBe(30 + 12 + 9);
  });

  it('a denied install answers 403 HUBSPOT_ACCESS_DENIED and writes nothing; its state does not work twice', async () => {
    const { jwt } = await signedIn();
    const before = await writeCounts(db.sql);
    const denied = await installThroughSimulator({ sim: sys.sim, orchestratorUrl: sys.functions.functionUrl('orchestrator'), userJwt: jwt, hubspotPortalId: HUB_ID, grant: 'deny' });
    expect(denied.status).toBe(403);
    expect(denied.body.code).toBe('HUBSPOT_ACCESS_DENIED');
    expect(await writeCounts(db.sql)).toEqual(before);
  });

  it('nothing secret reaches the functions\' output: no client secret, code, state or token', async () => {
    const { jwt } = await signedIn();
    const started = await fetch(sys.functions.functionUrl('orchestrator'), {
      method: 'POST',
      headers: { Authorization: `Bearer ${jwt}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ action: 'start_hubspot_install' }),
    });
    const { authorizeUrl } = (await started.json()) as { authorizeUrl: string };
    sys.sim.queueInstall({ portalId: HUB_ID, grant: 'approve' });
    const back = await sys.sim.authorize(authorizeUrl);
    const code = back.searchParams.get('code')!;
    const state = back.searchParams.get('state')!;
    // Another user presents it: refused, and logged without the code or the state.
    const other = await signedIn();
    const stolen = await fetch(sys.functions.functionUrl('orchestrator'), {
      method: 'POST',
      headers: { Authorization: `Bearer ${other.jwt}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ action: 'complete_hubspot_install', code, state }),
    });
    expect(stolen.status).toBe(400);
    const output = [...sys.functions.output.values()].flat().join('\n');
    expect(output).toContain('hubspot_install_started');
    for (const secret of [sys.oauthApp!.clientSecret, code, state, new URL(authorizeUrl).searchParams.get('code_challenge')!]) {
      expect(output).not.toContain(secret);
    }
  });
});
