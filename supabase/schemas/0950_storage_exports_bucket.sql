-- The private Storage bucket `exports` (CSV exports, written by the worker as
-- the service role) and its one policy: a signed-in user reads only objects
-- under their own folder (`<owner uuid>/<run>/<file>`); no write policy, so
-- RLS refuses writes to anon and authenticated. Owns nothing in storage (an
-- upsert of one row, one policy). Idempotent; without Storage's schema a notice.
do $$
begin
  if to_regclass('storage.buckets') is null or to_regclass('storage.objects') is null then
    raise notice 'storage schema not found: the exports bucket and its policy were not created (Supabase projects have it)';
    return;
  end if;

  -- 50 MB: the Free plan's global upload limit; raise both on a paid plan for larger exports.
  insert into storage.buckets (id, name, public, file_size_limit)
  values ('exports', 'exports', false, 52428800)
  on conflict (id) do update set public = false, file_size_limit = excluded.file_size_limit;

  drop policy if exists "exports: owners read their own files" on storage.objects;
  create policy "exports: owners read their own files" on storage.objects
    for select to authenticated
    using (bucket_id = 'exports' and (storage.foldername(name))[1] = (select auth.uid())::text);
end
$$;
