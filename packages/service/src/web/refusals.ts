import type { FastifyReply } from "fastify";
import { type AnyRefusal, retryAfterOf, ServiceError, statusOfKind } from "../errors.ts";
import { refusalText } from "../i18n/refusal-text.ts";
import type { FieldErrors } from "./context.ts";

export { refusalText };

/** Which form field shows which refusal; `status` where the page answers otherwise than by kind. */
export type RefusalFields = readonly (readonly [definition: AnyRefusal, field: string, status?: number])[];

/**
 * A refusal of one of `fields` as the form's field error and the page's status; null for anything
 * else (the caller rethrows it: the error page shows it with its text and status). A throttled
 * refusal tells the browser when to come back.
 */
export function refusalOnField(
  reply: FastifyReply,
  error: unknown,
  fields: RefusalFields,
): { errors: FieldErrors; status: number } | null {
  if (!(error instanceof ServiceError)) return null;
  const match = fields.find(([definition]) => error.is(definition));
  if (!match) return null;
  retryAfterHeader(reply, error);
  return { errors: { [match[1]]: refusalText(error) }, status: match[2] ?? statusOfKind[error.kind] };
}

export function retryAfterHeader(reply: FastifyReply, error: ServiceError): void {
  const retryAfter = retryAfterOf(error);
  if (retryAfter !== undefined) reply.header("retry-after", String(retryAfter));
}
