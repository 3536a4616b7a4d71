-- private.patch_is_applied(item, patch): whether HubSpot's item already holds
-- every value the patch sets (an object-valued field compared key by key;
-- JSON equality, so 1 = 1.0): the apply's "target already there" and a
-- retried batch's "our own earlier write". Immutable; owner only.
create function private.patch_is_applied(p_item jsonb, p_patch jsonb) returns boolean
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
begin
  return p_item is not null and private.patch_fields_of(p_item, p_patch) = p_patch;
end;
$$;
