import type { ServiceError } from "../errors.ts";
import type { MessageKey } from "./catalogue.ts";

/**
 * A refusal's text for a person: the catalogue's `refusal.<code>` (areas/refusals.ts holds one per
 * declared code, in every language) with the refusal's parameters. Pages show it in the reader's
 * language, the console in English.
 */
export function refusalText(error: ServiceError): {
  key: MessageKey;
  params: Record<string, string | number>;
} {
  const params: Record<string, string | number> = {};
  for (const [name, value] of Object.entries(error.params))
    if (typeof value === "string" || typeof value === "number") params[name] = value;
  // A wait is said in seconds, in the plural form its number takes.
  if (error.kind === "throttled" && typeof params.retryAfter === "number") params.count = params.retryAfter;
  return { key: `refusal.${error.definition.code}` as MessageKey, params };
}
