-- The schemas: user-visible tables and the queue API live in `public` (the
-- only schema the API exposes); secrets and queue internals in `private`,
-- which no API role may use (SECURITY DEFINER functions reach it).
create schema if not exists private;
revoke all on schema private from public;
