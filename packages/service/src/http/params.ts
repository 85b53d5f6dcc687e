import { type Address, parseAddress, parseDomain } from "../accounts/addresses.ts";
import { readWholeNumber } from "../accounts/paging.ts";
import { badRequest } from "../errors.ts";

/** Path and body addresses are checked at the edge: garbage gets a 400, never reaches a query. */
export function requireAddress(raw: unknown): Address {
  const address = typeof raw === "string" ? parseAddress(raw) : null;
  if (!address) throw badRequest("invalid e-mail address");
  return address;
}

export function requireDomain(raw: unknown): string {
  const domain = typeof raw === "string" ? parseDomain(raw) : null;
  if (!domain) throw badRequest("invalid domain name");
  return domain;
}

/**
 * An optional whole-number query parameter of the integration API: not a whole number is 400,
 * a negative one means the default, a larger one than `max` means `max` (userli's paging).
 */
export function queryInteger(raw: unknown, name: string, fallback: number, max: number): number {
  return readWholeNumber(raw, name, { fallback, max, outOfRange: "lenient", refuse: badRequest });
}
