// Standalone simulator: tsx hubspot-sim/cli.ts --port 4010 --size small|realistic --token demo-token --portal-id 123
//   [--latency-ms 150] (each CMS answer that long after its request)
//   OAuth: --client-id ID --client-secret SECRET --redirect-uri URL [--access-token-ttl 1800] registers one app whose
//   installs (GET /oauth/authorize) are all approved for the portal.

import { parseArgs } from 'node:util';
import { apiEndpoint } from '../shared/hubspot/api-paths.ts';
import { REALISTIC_PORTAL_SIZES, SMALL_PORTAL_SIZES, startHubSpotSimulator } from './server.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '4010' },
    size: { type: 'string', default: 'small' },
    token: { type: 'string', default: 'demo-token' },
    'portal-id': { type: 'string', default: '123' },
    seed: { type: 'string' },
    'max-per-10s': { type: 'string' },
    'latency-ms': { type: 'string' },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
    'redirect-uri': { type: 'string', multiple: true },
    'access-token-ttl': { type: 'string' },
  },
});

if (values.size !== 'small' && values.size !== 'realistic') {
  console.error(`--size must be small or realistic (got ${values.size})`);
  process.exit(2);
}

const oauthApp = values['client-id'] ?? values['client-secret'] ?? values['redirect-uri'];
if (oauthApp !== undefined && (!values['client-id'] || !values['client-secret'] || !values['redirect-uri']?.length)) {
  console.error('--client-id, --client-secret and --redirect-uri go together');
  process.exit(2);
}

const started = Date.now();
const sim = await startHubSpotSimulator({
  port: Number(values.port),
  ...(values['latency-ms'] ? { latencyMs: Number(values['latency-ms']) } : {}),
  ...(values['max-per-10s'] ? { rateLimit: { maxPer10s: Number(values['max-per-10s']) } } : {}),
  ...(values['access-token-ttl'] ? { oauth: { accessTokenTtlSeconds: Number(values['access-token-ttl']) } } : {}),
});
const portalId = Number(values['portal-id']);
sim.addPortal({
  portalId,
  token: values.token,
  sizes: values.size === 'realistic' ? REALISTIC_PORTAL_SIZES : SMALL_PORTAL_SIZES,
  ...(values.seed ? { seed: Number(values.seed) } : {}),
});
console.log(`HubSpot simulator listening on ${sim.url} (portal ${portalId}, ${values.size} content, ready in ${Date.now() - started} ms)`);
if (values['client-id'] && values['client-secret'] && values['redirect-uri']) {
  sim.registerApp({ clientId: values['client-id'], clientSecret: values['client-secret'], redirectUris: values['redirect-uri'] });
  sim.setAutoInstall({ portalId, grant: 'approve' });
  console.log(`OAuth app ${values['client-id']}: installs approved for portal ${portalId}; authorize at ${sim.url}/oauth/authorize, tokens at ${sim.url}${apiEndpoint('oauth_token').template}`);
}
console.log(`Try: curl -H 'Authorization: Bearer <token>' '${sim.url}${apiEndpoint('list', 'site_pages').template}?limit=2'`);

const shutdown = () => {
  void sim.close().then(() => process.exit(0));
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
