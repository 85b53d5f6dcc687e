import { checkAddress, checkDomain } from "./address-syntax.ts";

/**
 * Address syntax: one rule for every caller, shared with the mailbox janitor (address-syntax.ts).
 * Creation takes NEW addresses only; every lookup takes KNOWN ones, so a lookup of an address that
 * could never have been created finds nothing instead of being folded into another one.
 */
export interface Address {
  email: string;
  localPart: string;
  domain: string;
}

/** An address to look up (or an external destination): null when it cannot be any stored address. */
export function parseAddress(raw: string): Address | null {
  const check = checkAddress(raw, "known");
  return check.ok ? check.address : null;
}

/** An address to create (user, alias source): null when the service does not create it. */
export function parseNewAddress(raw: string): Address | null {
  const check = checkAddress(raw, "new");
  return check.ok ? check.address : null;
}

/** Why an address cannot be created, or null when it can. */
export function newAddressProblem(raw: string): string | null {
  const check = checkAddress(raw, "new");
  return check.ok ? null : check.reason;
}

/** A domain name to look up: null when it cannot be any managed domain. */
export function parseDomain(raw: string): string | null {
  const check = checkDomain(raw, "known");
  return check.ok ? check.domain : null;
}

/** A domain name to start managing: null when the service does not take it. */
export function parseNewDomain(raw: string): string | null {
  const check = checkDomain(raw, "new");
  return check.ok ? check.domain : null;
}
