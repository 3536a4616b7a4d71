// Page sizes per content type, from the registry (shared/content-types.ts).

import { CONTENT_TYPE_REGISTRY, CONTENT_TYPES, isContentType, type ContentType } from '../content-types.ts';

export { CONTENT_TYPES, isContentType, type ContentType };

/** Largest `limit` we ask for per request, per type (the registry's `pageSize`). */
export const PAGE_SIZE: Readonly<Record<ContentType, number>> = Object.fromEntries(
  CONTENT_TYPES.map((t) => [t, CONTENT_TYPE_REGISTRY[t].pageSize]),
) as Record<ContentType, number>;
