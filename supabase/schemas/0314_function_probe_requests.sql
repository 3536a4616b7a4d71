-- private.probe_requests(checkpoint): how many HubSpot requests a probe's
-- first round sends for its questions (askHubSpot, functions/worker/change-questions.ts):
-- two listings per CMS type (changed and archived, or the overlap window and
-- archived), and the first page of the HubDB tables list when HubDB is probed.
-- Later pages and HubDB rows' windows are asked for as they come.
-- claim_schedule_probe grants them with the claim; owner only.
create function private.probe_requests(p_checkpoint jsonb)
returns integer
language plpgsql
immutable
set search_path = ''
as $$
begin
  -- (plpgsql: its plan is kept; a sql function with its own search_path is planned at every call)
  return (select coalesce(sum(case when k in ('hubdb_tables', 'hubdb_rows') then 0 else 2 end), 0)::integer
                 + case when p_checkpoint -> 'types' ?| array['hubdb_tables', 'hubdb_rows'] then 1 else 0 end
            from jsonb_object_keys(p_checkpoint -> 'types') k);
end;
$$;
