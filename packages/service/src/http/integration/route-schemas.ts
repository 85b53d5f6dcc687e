import { Type } from "typebox";
import type { Scope } from "../../tokens/tokens.ts";
import {
  type ApiTag,
  errorResponses,
  messages,
  security,
  TokenErrorBody,
  tokenResponses,
} from "../schemas.ts";

/**
 * Pieces of the integration API's route schemas. Its answers are userli's, byte for byte: a
 * response schema lists the fields in the order the handler writes them.
 */

/** What every integration route's schema starts with: its group's tag and the scope the group needs. */
export const integrationRoute = (scope: Scope & ApiTag, summary: string, description?: string) => ({
  tags: [scope],
  summary,
  ...(description === undefined ? {} : { description }),
  security: security(scope),
});

/** A path that is not percent-encoded UTF-8 is refused before any route (http/errors.ts frameworkErrorHandler). */
export const invalidUrlEncoding = "invalid URL encoding";

/** 400 for a bad address in the path; 503 when the database does not answer. */
export const addressErrors = { 400: [messages.invalidAddress, invalidUrlEncoding] } as const;
export const domainErrors = { 400: [messages.invalidDomain, invalidUrlEncoding] } as const;
export const unavailable = { 503: [messages.unavailable] } as const;

/** The validation answer of a body field (http/errors.ts validationText). */
export const bodyFieldErrors = (...fields: string[]) => ({
  422: fields.map((field) => `body: ${field} is required`),
});

export const AddressList = (description: string, example: string[]) =>
  Type.Array(Type.String(), { description, examples: [example] });

export { errorResponses, messages };

/**
 * The guard's 401/403 plus the route's own (schemas.ts tokenResponses), with examples on the 401
 * that carries both the guard's `{message, error}` and the route's `{message}`.
 */
export function guardResponses(scope: Scope, own: { 401?: readonly string[]; 403?: readonly string[] } = {}) {
  const responses = tokenResponses(scope, own);
  if (!own[401]?.length) return responses;
  const examples = [
    ...((TokenErrorBody as { examples?: unknown[] }).examples ?? []),
    ...own[401].map((message) => ({ message })),
  ];
  return { ...responses, 401: { ...responses[401], examples } };
}
