-- No HubSpot token is written in clear any more: a database dump yields nothing
-- usable (issue #16).
--
-- The plaintext write path goes: public.connect_portal(owner, hub id, name, token)
-- is dropped (connect with sealed tokens: public.connect_portal_with_tokens,
-- through shared/hubspot/oauth-tokens.ts), and so is the plaintext reader
-- public.portal_credentials(portal) (the functions read through
-- public.claim_portal_token). A trigger refuses any new plaintext token in
-- private.portal_credentials.access_token, whoever writes it: a row may keep the
-- plaintext it already has, or have it cleared, never get a new one.
--
-- What stays, to upgrade existing deployments: rows written before
-- 20261130005000 still hold their token in access_token; claim_portal_token
-- still reads them (legacy fallback), and the worker's rotation step
-- (credentials_to_rotate / rotate_credentials) seals them and nulls the column.
-- The column itself is dropped by a later migration, once
--   select count(*) from private.portal_credentials where access_token is not null
-- is 0 in every deployment (the worker seals a batch per invocation when it has
-- HUBSPOT_TOKEN_KEYS; scripts/rotate-token-keys.ts does it all at once).
--
-- A dump restored in full still loads (pg_dump creates triggers after the data);
-- a data-only restore of a dump with legacy rows needs --disable-triggers.

drop function public.connect_portal(uuid, bigint, text, text);
drop function public.portal_credentials(uuid);

create function private.refuse_plaintext_token() returns trigger
language plpgsql
set search_path = ''
as $$
begin
  if new.access_token is not null and (tg_op = 'INSERT' or new.access_token is distinct from old.access_token) then
    raise exception 'private.portal_credentials: HubSpot tokens are stored sealed only (connect_portal_with_tokens); a plaintext access_token is refused'
      using errcode = '23514';
  end if;
  return new;
end;
$$;
revoke all on function private.refuse_plaintext_token() from public, anon, authenticated;

create trigger portal_credentials_no_plaintext
  before insert or update of access_token on private.portal_credentials
  for each row execute function private.refuse_plaintext_token();

comment on column private.portal_credentials.access_token is
  'LEGACY plaintext token of rows from before encryption, never written any more (trigger portal_credentials_no_plaintext); '
  'the rotation step seals it and sets this to null. Dropped once no row has one.';
