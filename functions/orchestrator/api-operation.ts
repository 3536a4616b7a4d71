// The shape of one endpoint's description (./api.ts builds openapi.json from
// them; ./sync.ts describes its own): a leaf, so describing files need not
// import the document builder.
import type { z } from 'zod';

export type Method = 'get' | 'post' | 'options';

export interface ApiResponse {
  description: string;
  /** JSON body schema(s) (one of); registered in apiSchemas. */
  json?: z.ZodType[];
  /** A CSV file instead of JSON. */
  csv?: boolean;
  headers?: Record<string, string>;
}

export interface ApiOperation {
  method: Method;
  /** OpenAPI path, relative to `<SUPABASE_URL>/functions/v1`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  query?: z.ZodObject;
  pathParams?: Record<string, { schema: z.ZodType; description: string }>;
  body?: z.ZodType[];
  /** A text/csv request body instead of JSON: its description. */
  csvBody?: string;
  responses: Record<number, ApiResponse>;
  /** false: no Authorization needed (CORS preflight); 'or-signed-link': a bearer token, or a signed link's query instead. */
  auth?: boolean | 'or-signed-link';
}
