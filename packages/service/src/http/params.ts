import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from "fastify";
import { type Address, parseAddress, parseDomain } from "../accounts/addresses.ts";
import { queryNumberRefusals, readWholeNumber } from "../accounts/paging.ts";
import { refusal } from "../errors.ts";

export const pathAddressInvalid = refusal(
  "path.address_invalid",
  "bad_request",
  () => "invalid e-mail address",
);
export const pathDomainInvalid = refusal("path.domain_invalid", "bad_request", () => "invalid domain name");

/** Path and body addresses are checked at the edge: garbage gets a 400, never reaches a query. */
export function requireAddress(raw: unknown): Address {
  const address = typeof raw === "string" ? parseAddress(raw) : null;
  if (!address) throw pathAddressInvalid();
  return address;
}

export function requireDomain(raw: unknown): string {
  const domain = typeof raw === "string" ? parseDomain(raw) : null;
  if (!domain) throw pathDomainInvalid();
  return domain;
}

/**
 * An optional whole-number query parameter of the integration API: not a whole number is 400,
 * a negative one means the default, a larger one than `max` means `max` (userli's paging).
 */
export function queryInteger(raw: unknown, name: string, fallback: number, max: number): number {
  return readWholeNumber(raw, name, { fallback, max, outOfRange: "lenient", refusals: queryNumberRefusals });
}

export const inputHoldsNul = refusal(
  "input.nul_character",
  "bad_request",
  () => "invalid input: NUL character",
);

/**
 * preValidation, for every route: no path parameter, query value or body field (nor a key) holds a
 * NUL. No address, search, filter, name or secret can contain one (SASL uses it as a separator,
 * and PostgreSQL refuses it in text, which would answer 500), so it is refused at the edge with a
 * 400 (the web's error page on a page) instead of by each query. A callback hook: one scan of the
 * few small values a request has.
 */
export function refuseNul(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  const nul = holdsNul(request.params, 0) || holdsNul(request.query, 0) || holdsNul(request.body, 0);
  done(nul ? inputHoldsNul() : undefined);
}

function holdsNul(value: unknown, depth: number): boolean {
  if (typeof value === "string") return value.includes("\0");
  if (value === null || typeof value !== "object" || depth > 16) return false;
  if (Array.isArray(value)) return value.some((item) => holdsNul(item, depth + 1));
  // A binary body (a key upload) is read by its route.
  if (ArrayBuffer.isView(value)) return false;
  for (const [key, item] of Object.entries(value))
    if (key.includes("\0") || holdsNul(item, depth + 1)) return true;
  return false;
}
