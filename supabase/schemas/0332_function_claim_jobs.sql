-- public.claim_jobs(worker, n, kinds): claims up to n jobs, expired job leases
-- first, then due pending jobs fairly across portals within their portal cap and
-- the fetch/export exclusion; each gets a new fencing token and job lease. Locks:
-- job rows FOR UPDATE SKIP LOCKED, the portal's claim lock (advisory, xact, tried
-- never waited for). The worker's claim; the service role only. docs/decisions/0003.
create function public.claim_jobs(p_worker_id text, p_max_jobs integer, p_kinds text[] default null)
returns setof public.jobs
language plpgsql
security definer
set search_path = ''
set plan_cache_mode = force_generic_plan
as $$
declare
  -- A row picked by id is checked against v_pending, which a generic plan keeps as a
  -- parameter: no partial index of pending jobs can then be read whole for it (decisions 0030, 0050).
  v_pending constant text := 'pending';
  v_want integer := p_max_jobs;
  v_ids bigint[];      -- picked this round: rows locked, pending ones' portals locked
  v_more bigint[];
  v_order bigint[];
  v_portals uuid[];
  v_loads bigint[];
  v_bound bigint;
  v_id bigint;
  v_candidate record;
  v_seen uuid;
  v_usable boolean;
  v_expired boolean;
  v_exhausted boolean;
  v_claimed integer;
  v_locked boolean := false; -- this transaction holds a portal's claim lock
  v_busy boolean;            -- a claimable job's portal was busy with another claimer
  v_retries integer := 0;
begin
  if p_worker_id is null or char_length(p_worker_id) not between 1 and 200 then
    raise exception 'worker_id must be 1-200 characters' using errcode = '22023';
  end if;
  if p_max_jobs is null or p_max_jobs not between 1 and 1000 then
    raise exception 'max_jobs must be between 1 and 1000, got %', p_max_jobs using errcode = '22023';
  end if;
  -- (Nested IFs: with no kinds given, no query runs at all.)
  if p_kinds is not null then
    if exists (select 1 from unnest(p_kinds) k
                where k is null or not exists (select 1 from private.job_kinds jk where jk.kind = k)) then
      raise exception 'unknown job kind in %', p_kinds using errcode = '22023';
    end if;
  end if;

  -- Expired job leases: a job on its last attempt fails (not claimed); the others are rescued first.
  select coalesce(bool_or(e.attempts >= e.max_attempts), false), coalesce(bool_or(e.attempts < e.max_attempts), false)
    into v_exhausted, v_expired
    from (select j.attempts, j.max_attempts from public.jobs j
           where j.status = 'running' and j.lease_expires_at <= now()
           order by j.lease_expires_at
           limit 1000) e;
  if v_exhausted then
    perform private.fail_exhausted_jobs(50);
  end if;

  -- Another round when the claim took fewer jobs than were picked (a picked
  -- job's portal changed between the pick and the claim), or after the 2 ms
  -- pause below.
  for v_round in 1 .. 5 loop
    v_ids := '{}';
    v_busy := false;

    -- Rescue (already running: no cap, exclusion or portal lock to check).
    if v_expired then
      select coalesce(array_agg(e.id order by e.lease_expires_at), '{}') into v_ids
        from (select e.id, e.lease_expires_at from public.jobs e
               where e.status = 'running' and e.lease_expires_at <= now() and e.attempts < e.max_attempts
                 and (p_kinds is null or e.kind = any (p_kinds))
               order by e.lease_expires_at
               limit v_want
                 for update skip locked) e;
    end if;

    if v_want - cardinality(v_ids) = 1 then
      -- 1. The first job, among the 128 first, of a portal with no running job
      --    (no cap or fetch to wait for there; an export still checks for its
      --    fetch). Per candidate, in order: idle portal, then its claim lock (the
      --    CASE keeps that order), then its row.
      select coalesce(array_agg(c.id), '{}') into v_more
        from (select j.id
                from (select p.id, p.claim_rank, p.run_after from public.jobs p
                       where p.status = 'pending' and p.run_after <= now()
                         and (p_kinds is null or p.kind = any (p_kinds))
                       order by p.claim_rank, p.run_after, p.id
                       limit 128) w
                join public.jobs j on j.id = w.id
               where j.status = v_pending and j.run_after <= now()
                 and case when (select 1 from public.jobs r
                                 where r.portal_id = j.portal_id and r.status = 'running' limit 1) is not null
                            then false -- (LIMIT: a probe per candidate, never a hash of every running job)
                          when j.kind = 'export' and (select 1 from public.jobs x
                                                       where x.portal_id = j.portal_id and x.kind = 'fetch'
                                                         and x.content_type = j.content_type
                                                         and x.status in ('pending', 'running') limit 1) is not null
                            then false
                          else pg_try_advisory_xact_lock(1903520117, hashtext(j.portal_id::text))
                     end
               order by w.claim_rank, w.run_after, w.id
               limit 1
                 for update of j skip locked) c;
      v_ids := v_ids || v_more;

      -- 2. No idle portal: among the 32 first claimable jobs, the portal with
      --    the fewest running jobs (each portal's load read once).
      if cardinality(v_more) = 0 then
        with w as materialized (
          select p.id, p.portal_id, p.kind, p.content_type, p.claim_rank, p.run_after
            from public.jobs p
           where p.status = 'pending' and p.run_after <= now()
             and (p_kinds is null or p.kind = any (p_kinds))
             and p.id <> all (v_ids)
           order by p.claim_rank, p.run_after, p.id
           limit 32
        ), load as (
          select d.portal_id, l.n, l.fetching, l.exporting
            from (select distinct w.portal_id from w) d
           cross join lateral (
                 select count(*) as n,
                        count(*) filter (where r.kind = 'fetch') as fetching,
                        coalesce(array_agg(r.content_type) filter (where r.kind = 'export'), '{}') as exporting
                   from public.jobs r where r.portal_id = d.portal_id and r.status = 'running') l
        )
        select coalesce(array_agg(w.id order by l.n, w.claim_rank, w.run_after, w.id), '{}'),
               coalesce(array_agg(w.portal_id order by l.n, w.claim_rank, w.run_after, w.id), '{}'),
               coalesce(array_agg(l.n order by l.n, w.claim_rank, w.run_after, w.id), '{}')
          into v_order, v_portals, v_loads
          from w
          join load l on l.portal_id = w.portal_id
         where (case w.kind when 'fetch' then l.fetching else l.n - l.fetching end)
                 < coalesce(private.portal_cap(w.portal_id, w.kind), 2147483647)
           and not (w.kind = 'fetch' and w.content_type = any (l.exporting))
           and not (w.kind = 'export' and (select 1 from public.jobs x
                                            where x.portal_id = w.portal_id and x.kind = 'fetch'
                                              and x.content_type = w.content_type
                                              and x.status in ('pending', 'running') limit 1) is not null);
        -- A portal being claimed in by someone else right now is skipped, but
        -- only for a portal no more loaded than it will be after that claim.
        v_bound := null;
        for i in 1 .. cardinality(v_order) loop
          exit when v_loads[i] > v_bound;
          if pg_try_advisory_xact_lock(1903520117, hashtext(v_portals[i]::text)) then
            v_locked := true;
            select j.id into v_id from public.jobs j
             where j.id = v_order[i] and j.status = v_pending and j.run_after <= now()
               for update skip locked;
            if found then
              v_ids := v_ids || v_id;
              exit;
            end if;
          else
            v_busy := true;
            v_bound := coalesce(v_bound, v_loads[i] + 1);
          end if;
        end loop;
      end if;
    elsif v_want > cardinality(v_ids) then
      -- A batch: claimable jobs in scan order (a portal's cap counting the
      -- batch is checked at the claim), then the claim locks of their portals
      -- (tried: a job whose portal another claimer is claiming in is left for
      -- the next claim; waiting would queue batches behind each other).
      select coalesce(array_agg(c.id order by c.claim_rank, c.run_after, c.id), '{}'),
             coalesce(array_agg(c.portal_id order by c.claim_rank, c.run_after, c.id), '{}')
        into v_order, v_portals
        from (select p.id, p.portal_id, p.claim_rank, p.run_after
                from public.jobs p
               where p.status = 'pending' and p.run_after <= now()
                 and (p_kinds is null or p.kind = any (p_kinds))
                 and p.id <> all (v_ids)
                 -- private.claimable(p.portal_id, p.kind, p.content_type), written out (decision 0003)
                 and (select case when count(*) = 0 then true
                                  else count(*) < coalesce(private.portal_cap(p.portal_id, p.kind), 2147483647) end
                        from public.jobs r
                       where r.portal_id = p.portal_id and r.kind = p.kind and r.status = 'running')
                 and not (p.kind = 'fetch' and (select 1 from public.jobs x
                                                 where x.portal_id = p.portal_id and x.kind = 'export'
                                                   and x.content_type = p.content_type and x.status = 'running'
                                                 limit 1) is not null)
                 and not (p.kind = 'export' and (select 1 from public.jobs x
                                                  where x.portal_id = p.portal_id and x.kind = 'fetch'
                                                    and x.content_type = p.content_type
                                                    and x.status in ('pending', 'running') limit 1) is not null)
               order by p.claim_rank, p.run_after, p.id
               limit v_want - cardinality(v_ids)
                 for update of p skip locked) c;
      select coalesce(array_agg(x.id order by x.ord), '{}') into v_more
        from unnest(v_order, v_portals) with ordinality as x(id, portal_id, ord)
       where pg_try_advisory_xact_lock(1903520117, hashtext(x.portal_id::text));
      v_locked := v_locked or cardinality(v_more) > 0;
      v_ids := v_ids || v_more;
    end if;

    -- 3. One job wanted and still none, and no fairer portal just busy (or
    --    tried twice already): the next claimable job in scan order. A
    --    portal's jobs are looked at under one try of its lock.
    if cardinality(v_ids) < v_want and p_max_jobs = 1 and (not v_busy or v_retries >= 2) then
      v_seen := null;
      for v_candidate in
        select p.id, p.portal_id, p.kind, p.content_type
          from public.jobs p
         where p.status = 'pending' and p.run_after <= now()
           and (p_kinds is null or p.kind = any (p_kinds))
           and p.id <> all (v_ids)
         order by p.claim_rank, p.run_after, p.id
         limit 2000 -- bounded work (and an index scan, never a sort of every pending job)
      loop
        exit when cardinality(v_ids) >= v_want;
        if v_candidate.portal_id is distinct from v_seen then
          v_seen := v_candidate.portal_id;
          v_usable := pg_try_advisory_xact_lock(1903520117, hashtext(v_candidate.portal_id::text));
          if v_usable then
            v_locked := true;
          elsif private.claimable(v_candidate.portal_id, v_candidate.kind, v_candidate.content_type) then
            v_busy := true;
          end if;
        end if;
        continue when not v_usable
                   or not private.claimable(v_candidate.portal_id, v_candidate.kind, v_candidate.content_type,
                                            1 + (select count(*) from public.jobs c
                                                  where c.id = any (v_ids) and c.portal_id = v_candidate.portal_id
                                                    and c.kind = v_candidate.kind and c.status = 'pending'));
        select j.id into v_id from public.jobs j
         where j.id = v_candidate.id and j.status = v_pending and j.run_after <= now()
           for update skip locked;
        if found then
          v_ids := v_ids || v_id;
        end if;
      end loop;
    end if;

    if cardinality(v_ids) = 0 then
      -- Nothing picked though a job is claimable: its portal was being claimed
      -- in by someone else at that moment (a claim holds its portal for about a
      -- millisecond). Pick again after 2 ms — at most twice, and never while
      -- holding a portal, which would keep others out of it. (Waiting for the
      -- busy portal's lock instead would herd every waiter onto that portal.)
      exit when not v_busy or v_retries >= 2 or v_locked;
      perform pg_sleep(0.002);
      v_retries := v_retries + 1;
      continue;
    end if;

    -- Claim; a pending job only if private.claimable still says so now, in a
    -- snapshot taken after its portal's claim lock (any earlier claim is seen).
    if cardinality(v_ids) = 1 then
      return query
      update public.jobs j
         set status = 'running',
             attempts = j.attempts + 1,
             worker_id = p_worker_id,
             fencing_token = nextval('private.fencing_token_seq'),
             lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds,
                                  (select k.lease_seconds from private.job_kinds k where k.kind = j.kind))),
             started_at = coalesce(j.started_at, now()),
             waiting_reason = null,
             updated_at = now()
       where j.id = v_ids[1]
         and (j.status = 'running'
              -- private.claimable(j.portal_id, j.kind, j.content_type), written out: this is the hot path
              -- (a portal's first running job is within any cap, which is at least 1: not looked up).
              -- Not a function call: decision 0003, "The claimable check, written out".
              or ((select case when count(*) = 0 then true
                               else count(*) < coalesce(private.portal_cap(j.portal_id, j.kind), 2147483647) end
                     from public.jobs r
                    where r.portal_id = j.portal_id and r.kind = j.kind and r.status = 'running')
                  and not (j.kind = 'export' and (select 1 from public.jobs x
                                                   where x.portal_id = j.portal_id and x.kind = 'fetch'
                                                     and x.content_type = j.content_type
                                                     and x.status in ('pending', 'running') limit 1) is not null)
                  and not (j.kind = 'fetch' and (select 1 from public.jobs x
                                                  where x.portal_id = j.portal_id and x.kind = 'export'
                                                    and x.content_type = j.content_type and x.status = 'running'
                                                  limit 1) is not null)))
      returning j.*;
    else
      -- A portal's n-th pending job of a kind in the batch must fit as the n-th.
      return query
      with picked as (
        select j.id, j.status,
               row_number() over (partition by j.portal_id, j.kind, j.status order by c.ord) as nth
          from unnest(v_ids) with ordinality as c(id, ord)
          join public.jobs j on j.id = c.id
      )
      update public.jobs j
         set status = 'running',
             attempts = j.attempts + 1,
             worker_id = p_worker_id,
             fencing_token = nextval('private.fencing_token_seq'),
             lease_expires_at = now() + make_interval(secs => coalesce(j.lease_seconds, k.lease_seconds)),
             started_at = coalesce(j.started_at, now()),
             waiting_reason = null,
             updated_at = now()
        from picked p, private.job_kinds k
       where j.id = p.id and k.kind = j.kind
         and (p.status = 'running'
              -- private.claimable(j.portal_id, j.kind, j.content_type, p.nth), written out: no function call per
              -- claimed job (the cap, at least 1, is not looked up for a portal's first running job)
              or ((select case when p.nth + count(*) <= 1 then true
                               else p.nth + count(*) <= coalesce(private.portal_cap(j.portal_id, j.kind), 2147483647) end
                     from public.jobs r
                    where r.portal_id = j.portal_id and r.kind = j.kind and r.status = 'running')
                  and not (j.kind = 'export' and (select 1 from public.jobs x
                                                   where x.portal_id = j.portal_id and x.kind = 'fetch'
                                                     and x.content_type = j.content_type
                                                     and x.status in ('pending', 'running') limit 1) is not null)
                  and not (j.kind = 'fetch' and (select 1 from public.jobs x
                                                  where x.portal_id = j.portal_id and x.kind = 'export'
                                                    and x.content_type = j.content_type and x.status = 'running'
                                                  limit 1) is not null)))
      returning j.*;
    end if;
    get diagnostics v_claimed = row_count;
    v_want := v_want - v_claimed;
    exit when v_want = 0 or v_claimed = cardinality(v_ids);
  end loop;
end;
$$;
comment on function public.claim_jobs(text, integer, text[]) is
  'Claims up to N jobs: expired job leases first, then due pending jobs, portals with fewer running jobs first, within their portal cap and the fetch/export exclusion (FOR UPDATE SKIP LOCKED; a new fencing token each).';
