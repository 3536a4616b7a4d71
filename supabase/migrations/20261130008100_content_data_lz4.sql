-- hubspot_content.data is compressed with lz4 where the server is built with
-- it (checked, not assumed: the embedded Postgres of tests and benchmarks is
-- built without it and keeps pglz, TOAST's default). Items above ~2 KB (site pages,
-- landing pages and blog posts: ~2.4 KB of JSON each) are compressed on every
-- insert and every rewrite of changed data, and decompressed to compare and
-- to export. Values already stored keep their compression until rewritten.
--
-- Measured on Postgres 15 built with lz4 (the simulator's 2,000 site pages,
-- INSERT … SELECT of uncompressed values, backend CPU per item, median of 5):
--   insert 22 -> 8 µs/item, rewrite 25 -> 10 µs/item, compare 8 -> 7 µs/item,
--   table 7.2 MB both (storing them uncompressed instead, toast_tuple_target
--   8160: 6 µs/item, 12.2 MB).
do $$
begin
  if exists (select 1 from pg_settings where name = 'default_toast_compression' and 'lz4' = any (enumvals)) then
    alter table public.hubspot_content alter column data set compression lz4;
  end if;
end
$$;
