-- private.publish_refusal(body): HubSpot's answer to a write it refused whole
-- (a 4xx other than 429: nothing applied), as private.publish_answer's shape
-- with no results, its `errors` that name inputs (context ids), and the
-- refusal itself (`refusal`: HubSpot's error object, or {message: the body's
-- first 2,000 characters} when it is not JSON), which every sent item gets.
-- Immutable; for record_publish_batch and record_restore_batch; owner only.
create function private.publish_refusal(p_body text) returns jsonb
language plpgsql
immutable
set search_path = ''
as $$
declare
  v_body jsonb;
begin
  if p_body is not null and pg_input_is_valid(p_body, 'jsonb') then
    v_body := p_body::jsonb;
  end if;
  if jsonb_typeof(v_body) is distinct from 'object' then
    v_body := jsonb_build_object('message', coalesce(left(p_body, 2000), 'HubSpot refused the request'));
  end if;
  return jsonb_build_object(
    'results', '[]'::jsonb,
    'errors', case when jsonb_typeof(v_body -> 'errors') = 'array'
                   then (select coalesce(jsonb_agg(e), '[]'::jsonb) from jsonb_array_elements(v_body -> 'errors') e
                          where jsonb_typeof(e) = 'object')
                   else '[]'::jsonb end,
    'refusal', v_body);
end;
$$;
