-- private.refresh_margin_seconds(lifetime, margin): how long before expiry an
-- access token is refreshed: the margin (default 300 s), at most a quarter of
-- its lifetime. Immutable; called by connect_portal_with_tokens and
-- complete_token_refresh; owner only.
create function private.refresh_margin_seconds(p_lifetime_seconds integer, p_margin_seconds integer) returns double precision
language plpgsql immutable
set search_path = ''
as $$
begin
  return least(greatest(coalesce(p_margin_seconds, 300), 0), p_lifetime_seconds / 4.0);
end;
$$;
