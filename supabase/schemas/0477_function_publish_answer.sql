-- private.publish_answer(body): HubSpot's answer text to a batch read or
-- update, parsed once: one answer object (`results`, optionally `errors`, as
-- the CMS v3 batch endpoints answer 200 and 207), or a JSON array of them (a
-- batch that took several requests: HubDB rows table by table, redirects one
-- by one, assembled by the worker as text) merged into
-- {results, errors, pending, read_at}: `pending` are HubSpot's answers to the
-- first step of a write whose last step's outcome is unknown (a draft PATCHed
-- and not known pushed live, HubDB draft rows not known published: the
-- worker's `pending` array), `read_at` the earliest `startedAt` of the
-- answers (HubSpot's clock when a batch read started; null when none says).
-- Refuses (22004 / 22P02 / 22023) a missing body, invalid JSON, an answer
-- without a results array, a result or pending item without an id. Stable
-- (a startedAt without an offset reads in the session's time zone); for the
-- publish holder functions; owner only.
create function private.publish_answer(p_body text) returns jsonb
language plpgsql
stable
set search_path = ''
as $$
declare
  v_body jsonb;
  v_answers jsonb;
  v_results jsonb;
  v_errors jsonb;
  v_pending jsonb;
begin
  if p_body is null then
    raise exception 'HubSpot''s answer is required' using errcode = '22004';
  end if;
  if not pg_input_is_valid(p_body, 'jsonb') then
    raise exception 'HubSpot''s answer is not valid JSON (%)', (select e.message from pg_input_error_info(p_body, 'jsonb') e)
      using errcode = '22P02';
  end if;
  v_body := p_body::jsonb;
  v_answers := case jsonb_typeof(v_body) when 'array' then v_body when 'object' then jsonb_build_array(v_body) end;
  if v_answers is null or exists (select 1 from jsonb_array_elements(v_answers) a
                                   where jsonb_typeof(a) <> 'object' or coalesce(jsonb_typeof(a -> 'results'), '') <> 'array'
                                      or coalesce(jsonb_typeof(a -> 'errors'), 'array') <> 'array'
                                      or coalesce(jsonb_typeof(a -> 'pending'), 'array') <> 'array') then
    raise exception 'HubSpot''s answer must be an object with a results array (and perhaps errors and pending arrays), or an array of them'
      using errcode = '22023';
  end if;
  select coalesce(jsonb_agg(r), '[]'::jsonb) into v_results
    from jsonb_array_elements(v_answers) a, jsonb_array_elements(a -> 'results') r;
  if exists (select 1 from jsonb_array_elements(v_results) r
              where jsonb_typeof(r) <> 'object' or coalesce(jsonb_typeof(r -> 'id'), '') not in ('string', 'number')
                 or r ->> 'id' = '') then
    raise exception 'every result of HubSpot''s answer must be an object with an id' using errcode = '22023';
  end if;
  select coalesce(jsonb_agg(e), '[]'::jsonb) into v_errors
    from jsonb_array_elements(v_answers) a, jsonb_array_elements(coalesce(a -> 'errors', '[]'::jsonb)) e;
  select coalesce(jsonb_agg(d), '[]'::jsonb) into v_pending
    from jsonb_array_elements(v_answers) a, jsonb_array_elements(coalesce(a -> 'pending', '[]'::jsonb)) d;
  if exists (select 1 from jsonb_array_elements(v_pending) d
              where jsonb_typeof(d) <> 'object' or coalesce(jsonb_typeof(d -> 'id'), '') not in ('string', 'number')
                 or d ->> 'id' = '') then
    raise exception 'every pending item of HubSpot''s answer must be an object with an id' using errcode = '22023';
  end if;
  return jsonb_build_object('results', v_results, 'errors', v_errors, 'pending', v_pending,
    'read_at', (select to_jsonb(min((a ->> 'startedAt')::timestamptz)) from jsonb_array_elements(v_answers) a
                 where jsonb_typeof(a -> 'startedAt') = 'string' and pg_input_is_valid(a ->> 'startedAt', 'timestamptz')));
end;
$$;
