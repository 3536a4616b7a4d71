-- Local stand-ins for what hosted Supabase provides and embedded Postgres has
-- not: pg_cron's cron.schedule / cron.alter_job / cron.job / cron.job_run_details
-- (no pg_cron extension row: private.cron_interval gives sub-minute schedules,
-- which the local cron runs), pg_net's net.http_post (requests
-- recorded for the local cron to send) and Vault's decrypted_secrets. Created
-- only by local/cron/cron.ts, never by a migration; idempotent.
create schema if not exists cron;
create table if not exists cron.job (
  jobid bigserial primary key,
  schedule text not null,
  command text not null,
  database text not null default current_database(),
  username text not null default current_user,
  active boolean not null default true,
  jobname text unique
);
create table if not exists cron.job_run_details (
  runid bigserial primary key,
  jobid bigint not null,
  command text not null,
  status text not null check (status in ('running', 'succeeded', 'failed')),
  return_message text,
  start_time timestamptz not null default now(),
  end_time timestamptz
);
-- pg_cron's signature; like pg_cron (1.3+), a job of the same name is replaced.
create or replace function cron.schedule(job_name text, schedule text, command text)
returns bigint
language sql
as $$
  insert into cron.job (jobname, schedule, command) values (job_name, schedule, command)
  on conflict (jobname) do update set schedule = excluded.schedule, command = excluded.command, active = true
  returning jobid
$$;
-- pg_cron's (1.4+) signature: what is not null is changed; public.heal_cron_jobs touches a job with active := true.
create or replace function cron.alter_job(job_id bigint, schedule text default null, command text default null,
  database text default null, username text default null, active boolean default null)
returns void
language sql
as $$
  update cron.job j
     set schedule = coalesce(alter_job.schedule, j.schedule), command = coalesce(alter_job.command, j.command),
         database = coalesce(alter_job.database, j.database), username = coalesce(alter_job.username, j.username),
         active = coalesce(alter_job.active, j.active)
   where j.jobid = job_id
$$;
create or replace function cron.unschedule(job_name text)
returns boolean
language sql
as $$
  with gone as (delete from cron.job j where j.jobname = job_name returning 1) select exists (select from gone)
$$;

create schema if not exists net;
create table if not exists net.http_request_queue (
  id bigserial primary key,
  method text not null,
  url text not null,
  headers jsonb not null,
  body jsonb,
  timeout_milliseconds integer not null
);
create table if not exists net._http_response (
  id bigint primary key,
  status_code integer,
  content text,
  error_msg text,
  created timestamptz not null default now()
);
-- pg_net's signature: the request is queued (sent after commit, by the local cron here) and its id returned.
create or replace function net.http_post(
  url text, body jsonb default '{}'::jsonb, params jsonb default '{}'::jsonb,
  headers jsonb default '{"Content-Type": "application/json"}'::jsonb, timeout_milliseconds integer default 5000)
returns bigint
language sql
as $$
  insert into net.http_request_queue (method, url, headers, body, timeout_milliseconds)
  values ('POST', url, headers, body, timeout_milliseconds)
  returning id
$$;

create schema if not exists vault;
create table if not exists vault.secrets (
  id uuid primary key default gen_random_uuid(),
  name text unique,
  secret text not null
);
create or replace view vault.decrypted_secrets as select s.id, s.name, s.secret as decrypted_secret from vault.secrets s;
-- Vault's signature (the secret is stored in plain text here: a local database only).
create or replace function vault.create_secret(new_secret text, new_name text default null, new_description text default '')
returns uuid
language sql
as $$
  insert into vault.secrets (name, secret) values (new_name, new_secret)
  on conflict (name) do update set secret = excluded.secret
  returning id
$$;
