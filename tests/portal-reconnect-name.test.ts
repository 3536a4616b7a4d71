// #31: reconnecting the same HubSpot account keeps the portal's name unless a
// new one is given (public.connect_portal_with_tokens with a null name).
import { describe, expect, it } from 'vitest';
import { createUserWithPortal, useTestDatabase } from './support/database.ts';

const db = useTestDatabase();

/** Connects again with the portal's own sealed token (as a reconnect would store a new one). */
async function reconnect(ownerId: string, hubspotPortalId: number, name: string | null) {
  const [row] = await db.sql`
    select public.connect_portal_with_tokens(${ownerId}, ${hubspotPortalId}, ${name}, 'private_app', c.key_id,
             c.access_token_enc, null, null, null, c.access_token_hash, null) as id
      from private.portal_credentials c join public.portals p on p.id = c.portal_id
     where p.owner_id = ${ownerId} and p.hubspot_portal_id = ${hubspotPortalId}`;
  return row!.id as string;
}
async function nameOf(portalId: string) {
  const [row] = await db.sql`select name from public.portals where id = ${portalId}`;
  return row!.name as string;
}

describe('reconnect keeps the portal name', () => {
  it('no name keeps it, a new name renames, a new portal without one gets "HubSpot portal <id>"', async () => {
    const { userId, portalId, hubspotPortalId } = await createUserWithPortal(db.sql);
    const original = await nameOf(portalId);
    expect(await reconnect(userId, hubspotPortalId, null)).toBe(portalId);
    expect(await nameOf(portalId)).toBe(original);
    expect(await reconnect(userId, hubspotPortalId, 'Marketing site')).toBe(portalId);
    expect(await nameOf(portalId)).toBe('Marketing site');

    const [sealed] = await db.sql`select key_id, access_token_enc, access_token_hash from private.portal_credentials where portal_id = ${portalId}`;
    const [fresh] = await db.sql`select public.connect_portal_with_tokens(${userId}, ${hubspotPortalId + 1}, null, 'private_app',
        ${sealed!.key_id}, ${sealed!.access_token_enc}, null, null, null, ${sealed!.access_token_hash}, null) as id`;
    expect(await nameOf(fresh!.id as string)).toBe(`HubSpot portal ${hubspotPortalId + 1}`);
  });
});
