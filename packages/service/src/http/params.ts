import { type Address, parseAddress, parseDomain } from "../accounts/addresses.ts";
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

/** An optional whole-number query parameter. */
export function queryInteger(raw: unknown, name: string, fallback: number, max: number): number {
  if (raw === undefined || raw === "") return fallback;
  if (typeof raw !== "string" || !/^-?\d{1,10}$/.test(raw))
    throw badRequest(`${name}: must be a whole number`);
  const value = Number(raw);
  if (value < 0) return fallback;
  return Math.min(value, max);
}
