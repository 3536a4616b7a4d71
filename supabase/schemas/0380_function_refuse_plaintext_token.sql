-- Trigger portal_credentials_no_plaintext: refuses any new plaintext token in
-- private.portal_credentials.access_token, whoever writes it (a row may keep or
-- clear the one it has). No locks; the trigger function is for the owner only.
-- docs/decisions/0007-credentials-and-oauth.md.
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
create trigger portal_credentials_no_plaintext
  before insert or update of access_token on private.portal_credentials
  for each row execute function private.refuse_plaintext_token();
