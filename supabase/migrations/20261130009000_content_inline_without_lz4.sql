-- Where the server has no lz4, hubspot_content rows are stored inline and
-- uncompressed up to a full page (toast_tuple_target 8160) instead of being
-- compressed with pglz, TOAST's only other method.
--
-- Why: site pages, landing pages and blog posts are ~2.4 KB of JSON each,
-- just over the default target (~2 KB), so every insert and every rewrite of
-- changed data ran pglz over the item, and every comparison with a re-fetched
-- item decompressed it. pglz costs about three times lz4 (20261130008100), and
-- on the fetch path Postgres CPU is what a fleet of portals runs out of first
-- (README, Capacity). Disk is the cheaper resource here: the table grows by
-- about half.
--
-- Measured on the embedded Postgres of tests and benchmarks (built without
-- lz4):
--   bench/scenarios/store-cost.ts, A/B interleaved, 3 repetitions, backend
--   CPU per item: first fetch of site pages 66.7 -> 50.0 µs (×0.75), of blog
--   posts 66.7 -> 50.0 µs (×0.75); HubDB rows (small items, never compressed)
--   unchanged; re-fetches within noise; table 51.6 -> 76.3 MB.
--   Scenario 7 (the fleet): Postgres CPU per 1,000 items stored 68 -> 54 ms.
-- A server with lz4 (hosted Supabase) keeps compressing with it: lz4 costs a
-- few µs per item and halves the table. Items over 8 KB are compressed (with
-- whatever the column's method is) as before.
do $$
begin
  if not exists (select 1 from pg_settings where name = 'default_toast_compression' and 'lz4' = any (enumvals)) then
    alter table public.hubspot_content set (toast_tuple_target = 8160);
  end if;
end
$$;
