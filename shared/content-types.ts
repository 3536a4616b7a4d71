// The HubSpot content types and job kinds the queue knows (mirrors the SQL checks).
export const CONTENT_TYPES = [
  'site_pages',
  'landing_pages',
  'blog_posts',
  'blog_authors',
  'blog_tags',
  'hubdb_tables',
  'hubdb_rows',
  'url_redirects',
] as const;
export type ContentType = (typeof CONTENT_TYPES)[number];

export const JOB_KINDS = ['fetch', 'export'] as const;
export type JobKind = (typeof JOB_KINDS)[number];
