-- The private Storage bucket `exports` the worker writes CSV exports to, and
-- one policy: a signed-in user may read (download, sign URLs for) only the
-- objects under their own folder — export paths are `<owner uuid>/<run>/<file>`.
-- Nobody but the service role (the worker) writes: there is no insert, update
-- or delete policy, so RLS refuses those to anon and authenticated.
-- Idempotent: re-running it keeps the bucket private, re-applies the limit and
-- re-creates the policy. On a Postgres without Supabase Storage's schema it
-- does nothing but say so.
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
