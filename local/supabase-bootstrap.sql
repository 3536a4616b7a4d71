-- Local/test only: gives a plain Postgres the parts of Supabase's image that
-- our migrations rely on. Never a migration: a real Supabase project has all of
-- this already. Every statement is idempotent so it can run against
-- `supabase start`'s database too, and against a hosted-like server (DATABASE_URL)
-- where the migrating role owns nothing in auth and storage and may not CREATE
-- there: each object is looked up first (to_regclass, to_regnamespace, ...) and
-- created only when missing; CREATE ... IF NOT EXISTS alone would still need
-- that privilege.
-- Definitions follow supabase/postgres (migrations/db/init-scripts and
-- auth's own migrations).

do $$
begin
  if not exists (select 1 from pg_roles where rolname = 'anon') then
    create role anon nologin noinherit;
  end if;
  if not exists (select 1 from pg_roles where rolname = 'authenticated') then
    create role authenticated nologin noinherit;
  end if;
  if not exists (select 1 from pg_roles where rolname = 'service_role') then
    create role service_role nologin noinherit bypassrls;
  end if;
  if not exists (select 1 from pg_roles where rolname = 'authenticator') then
    create role authenticator login noinherit;
  end if;
end
$$;

-- On a real Supabase database these memberships exist already and may not be
-- ours to grant: say so and go on.
do $$
begin
  grant anon, authenticated, service_role to authenticator;
  execute format('grant anon, authenticated, service_role to %I', current_user);
exception when insufficient_privilege or invalid_grant_operation then
  raise notice 'role memberships left as they are: %', sqlerrm;
end
$$;

-- Schema usage for the API roles, granted only where it is missing (on Supabase it is there,
-- and granting again may need a grant option the migrating role lacks).
create or replace function pg_temp.grant_usage(p_schema text) returns void
language plpgsql
as $f$
declare
  r text;
begin
  foreach r in array array['anon', 'authenticated', 'service_role'] loop
    if not exists (select 1 from pg_namespace n cross join lateral aclexplode(n.nspacl) x
                    where n.nspname = p_schema and x.grantee = r::regrole and x.privilege_type = 'USAGE') then
      execute format('grant usage on schema %I to %I', p_schema, r);
    end if;
  end loop;
end
$f$;

do $$
begin
  if to_regnamespace('extensions') is null then
    create schema extensions;
  end if;
  if not exists (select 1 from pg_extension where extname = 'pgcrypto') then
    create extension pgcrypto with schema extensions;
  end if;
end
$$;
select pg_temp.grant_usage('extensions');
select pg_temp.grant_usage('public');
-- Supabase's defaults: everything new in public is granted to the API roles.
-- Our migrations must revoke what they do not want exposed.
alter default privileges in schema public grant all on tables to anon, authenticated, service_role;
alter default privileges in schema public grant all on functions to anon, authenticated, service_role;
alter default privileges in schema public grant all on sequences to anon, authenticated, service_role;

do $$
begin
  if to_regnamespace('auth') is null then
    create schema auth;
  end if;
end
$$;
select pg_temp.grant_usage('auth');

do $$
begin
  if to_regclass('auth.users') is null then
    create table auth.users (
      instance_id uuid,
      id uuid primary key,
      aud varchar(255),
      role varchar(255),
      email varchar(255),
      raw_app_meta_data jsonb,
      raw_user_meta_data jsonb,
      created_at timestamptz default now(),
      updated_at timestamptz default now()
    );
  end if;
end
$$;

-- What the local Auth (local/auth/auth.ts) keeps, under GoTrue's own names:
-- password users, their sessions and rotating refresh tokens. Each column and
-- table is added only where missing (on Supabase they all exist).
do $$
declare
  c record;
begin
  for c in select * from (values
      ('encrypted_password', 'varchar(255)'), ('email_confirmed_at', 'timestamptz'), ('last_sign_in_at', 'timestamptz'),
      ('phone', 'text'), ('is_anonymous', 'boolean not null default false')) as t(name, type)
  loop
    if not exists (select 1 from pg_attribute where attrelid = 'auth.users'::regclass and attname = c.name and not attisdropped) then
      execute format('alter table auth.users add column %I %s', c.name, c.type);
    end if;
  end loop;
  if to_regclass('auth.sessions') is null then
    create table auth.sessions (
      id uuid primary key,
      user_id uuid not null references auth.users (id) on delete cascade,
      created_at timestamptz default now(),
      updated_at timestamptz default now(),
      refreshed_at timestamp,
      aal text,
      not_after timestamptz
    );
  end if;
  if to_regclass('auth.refresh_tokens') is null then
    create table auth.refresh_tokens (
      id bigserial primary key,
      token varchar(255) unique,
      user_id varchar(255),
      revoked boolean,
      created_at timestamptz default now(),
      updated_at timestamptz default now(),
      parent varchar(255),
      session_id uuid references auth.sessions (id) on delete cascade
    );
  end if;
end
$$;

-- As in supabase/auth: reads the claims PostgREST puts in request.jwt.claims
-- (with the older per-claim settings as fallback). Created only where missing:
-- on Supabase they exist and belong to supabase_auth_admin.
do $$
begin
  if to_regprocedure('auth.uid()') is null then
    create function auth.uid() returns uuid
    language sql stable
    as $f$
      select coalesce(
        nullif(current_setting('request.jwt.claim.sub', true), ''),
        (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
      )::uuid
    $f$;
  end if;
  if to_regprocedure('auth.role()') is null then
    create function auth.role() returns text
    language sql stable
    as $f$
      select coalesce(
        nullif(current_setting('request.jwt.claim.role', true), ''),
        (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role')
      )::text
    $f$;
  end if;
  if to_regprocedure('auth.jwt()') is null then
    create function auth.jwt() returns jsonb
    language sql stable
    as $f$
      select coalesce(
        nullif(current_setting('request.jwt.claim', true), ''),
        nullif(current_setting('request.jwt.claims', true), '')
      )::jsonb
    $f$;
    grant execute on function auth.uid(), auth.role(), auth.jwt() to anon, authenticated, service_role;
  end if;
end
$$;

do $$
begin
  if not exists (select 1 from pg_publication where pubname = 'supabase_realtime') then
    create publication supabase_realtime;
  end if;
end
$$;

-- Storage: the part of Supabase Storage's schema our migrations and tests use
-- (supabase/storage's migrations: buckets, objects, storage.foldername), with
-- RLS on both tables as on Supabase. Created only where missing: on Supabase
-- they exist and belong to supabase_storage_admin (left as they are).
do $$
begin
  if to_regnamespace('storage') is null then
    create schema storage;
  end if;
end
$$;
select pg_temp.grant_usage('storage');

do $$
begin
  if to_regclass('storage.buckets') is null then
    create table storage.buckets (
      id text primary key,
      name text not null,
      owner uuid,
      created_at timestamptz default now(),
      updated_at timestamptz default now(),
      public boolean default false,
      avif_autodetection boolean default false,
      file_size_limit bigint,
      allowed_mime_types text[],
      owner_id text
    );
    create unique index bname on storage.buckets (name);
    alter table storage.buckets enable row level security;
    grant all on storage.buckets to anon, authenticated, service_role;
  end if;
  if to_regclass('storage.objects') is null then
    create table storage.objects (
      id uuid primary key default gen_random_uuid(),
      bucket_id text references storage.buckets (id),
      name text,
      owner uuid,
      created_at timestamptz default now(),
      updated_at timestamptz default now(),
      last_accessed_at timestamptz default now(),
      metadata jsonb,
      path_tokens text[] generated always as (string_to_array(name, '/')) stored,
      version text,
      owner_id text,
      user_metadata jsonb
    );
    create unique index bucketid_objname on storage.objects (bucket_id, name);
    alter table storage.objects enable row level security;
    grant all on storage.objects to anon, authenticated, service_role;
  end if;
end
$$;

do $$
begin
  if to_regprocedure('storage.foldername(text)') is null then
    create function storage.foldername(name text) returns text[]
    language plpgsql
    as $f$
    declare
      _parts text[];
    begin
      select string_to_array(name, '/') into _parts;
      return _parts[1:array_length(_parts, 1) - 1];
    end
    $f$;
    grant execute on function storage.foldername(text) to anon, authenticated, service_role;
  end if;
end
$$;

-- As on Supabase (supabase/storage's migration 0055-prevent-direct-deletes):
-- rows of storage.buckets and storage.objects are not deleted by SQL, only
-- through the Storage API (which sets storage.allow_delete_query for its own
-- transactions), so no file is orphaned in the storage backend. Added only to
-- the stand-in tables: where Storage's own migrations have run
-- (storage.migrations exists) the protection is Storage's, left as it is.
do $$
begin
  if to_regclass('storage.migrations') is not null then
    raise notice 'storage schema managed by Supabase Storage: its delete protection left as it is';
    return;
  end if;
  if to_regprocedure('storage.protect_delete()') is null then
    create function storage.protect_delete() returns trigger
    language plpgsql
    as $f$
    begin
      if coalesce(current_setting('storage.allow_delete_query', true), 'false') != 'true' then
        raise exception 'Direct deletion from storage tables is not allowed. Use the Storage API instead.'
          using hint = 'This prevents accidental data loss from orphaned objects.', errcode = '42501';
      end if;
      return null;
    end
    $f$;
  end if;
  if not exists (select 1 from pg_trigger where tgrelid = 'storage.buckets'::regclass and tgname = 'protect_buckets_delete') then
    create trigger protect_buckets_delete before delete on storage.buckets
      for each statement execute function storage.protect_delete();
  end if;
  if not exists (select 1 from pg_trigger where tgrelid = 'storage.objects'::regclass and tgname = 'protect_objects_delete') then
    create trigger protect_objects_delete before delete on storage.objects
      for each statement execute function storage.protect_delete();
  end if;
exception when insufficient_privilege then
  raise notice 'storage delete protection left as it is: %', sqlerrm;
end
$$;
