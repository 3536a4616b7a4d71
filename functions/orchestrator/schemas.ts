// Request bodies the orchestrator accepts, validated with zod.
import { z } from 'zod';
import { CONTENT_TYPES, JOB_KINDS } from '../../shared/content-types.ts';

const uuid = z.string().uuid();

export const createRunBody = z
  .object({
    action: z.literal('create_run').optional(),
    portalId: uuid,
    contentTypes: z
      .array(z.enum(CONTENT_TYPES))
      .min(1)
      .max(CONTENT_TYPES.length)
      .refine((ts) => new Set(ts).size === ts.length, 'content types must be distinct')
      .optional(),
    kind: z.enum(JOB_KINDS).optional(),
  })
  .strict();

export const stopRunBody = z.object({ action: z.literal('stop'), runId: uuid }).strict();

export const connectPortalBody = z
  .object({
    action: z.literal('connect_portal'),
    name: z.string().trim().min(1).max(200).refine((s) => !s.includes('\u0000'), 'must not contain NUL characters'),
    accessToken: z.string().min(1).max(4096).regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces'),
  })
  .strict();

export const runQuery = z.object({ runId: uuid });

export type CreateRunBody = z.infer<typeof createRunBody>;
export type StopRunBody = z.infer<typeof stopRunBody>;
export type ConnectPortalBody = z.infer<typeof connectPortalBody>;

/** Field errors in a stable, JSON-friendly shape (never echoing secret values). */
export function fieldErrors(error: z.ZodError): { path: string; message: string }[] {
  return error.issues.slice(0, 20).map((i) => ({ path: i.path.map(String).join('.') || '(body)', message: i.message }));
}
