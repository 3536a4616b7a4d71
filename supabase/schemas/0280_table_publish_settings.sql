-- private.publish_settings: the one row of the publish feature's limits: how
-- long a plan may be approved after its plan run settled, how many items one
-- HubSpot batch request carries, the largest CSV an import takes and the most
-- edits one plan holds. Read by create_publish_plan, import_csv_edits and
-- settlement (private.settle_publish_run); changed by operators (SQL), never
-- by the API. docs/publish.md.
create table private.publish_settings (
  id boolean primary key default true check (id),
  plan_fresh_minutes integer not null default 30
    constraint publish_settings_plan_fresh_minutes_range check (plan_fresh_minutes between 1 and 1440),
  batch_size integer not null default 100
    constraint publish_settings_batch_size_range check (batch_size between 1 and 100),
  max_csv_bytes integer not null default 5242880
    constraint publish_settings_max_csv_bytes_range check (max_csv_bytes between 1024 and 104857600),
  max_edits_per_plan integer not null default 50000
    constraint publish_settings_max_edits_per_plan_range check (max_edits_per_plan between 1 and 1000000)
);
comment on table private.publish_settings is
  'Publish limits: a plan is approvable plan_fresh_minutes after its plan run settled; batch_size items per HubSpot batch request (HubSpot''s limit: 100); max_csv_bytes per CSV import; max_edits_per_plan.';
alter table private.publish_settings enable row level security;
insert into private.publish_settings default values;
