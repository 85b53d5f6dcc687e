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
