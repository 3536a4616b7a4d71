-- private.audit_object_type(type): the `objectType` HubSpot's CMS audit log
-- gives a content type's events (PublicAuditLog's enum): WEBSITE_PAGE,
-- LANDING_PAGE, BLOG_POST, HUBDB_TABLE (tables and their rows: an event names
-- the table), URL_MAPPING; null for blog authors and tags, which the enum
-- lacks (HubSpot logs no event for them). The SQL copy of
-- shared/hubspot/write-endpoints.ts's AUDIT_OBJECT_TYPE
-- (tests/publish-sql.test.ts keeps them equal). Immutable; for
-- record_window_events; owner only.
create function private.audit_object_type(p_content_type text) returns text
language plpgsql
immutable
parallel safe
set search_path = ''
as $$
begin
  return case p_content_type
    when 'site_pages' then 'WEBSITE_PAGE'
    when 'landing_pages' then 'LANDING_PAGE'
    when 'blog_posts' then 'BLOG_POST'
    when 'hubdb_tables' then 'HUBDB_TABLE'
    when 'hubdb_rows' then 'HUBDB_TABLE'
    when 'url_redirects' then 'URL_MAPPING'
  end;
end;
$$;
