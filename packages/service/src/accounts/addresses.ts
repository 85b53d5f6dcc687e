/**
 * Address syntax: one rule for every caller. Addresses are compared lower-cased; anything that
 * cannot be a mailbox address (no '@', control characters, spaces, over-long parts) is refused
 * before it reaches a query.
 */
export interface Address {
  email: string;
  localPart: string;
  domain: string;
}

const maxAddressLength = 254;
const maxLocalPartLength = 64;
const forbidden = /[\s\p{Cc}"(),:;<>[\\\]]/u;
const domainLabel = /^(?!-)[\p{L}\p{N}-]{1,63}(?<!-)$/u;

export function parseAddress(raw: string): Address | null {
  if (typeof raw !== "string" || raw.length > maxAddressLength) return null;
  const at = raw.lastIndexOf("@");
  if (at < 1 || raw.indexOf("@") !== at) return null;
  const localPart = raw.slice(0, at);
  const domain = parseDomain(raw.slice(at + 1));
  if (domain === null || localPart.length > maxLocalPartLength || forbidden.test(localPart)) return null;
  if (localPart.startsWith(".") || localPart.endsWith(".") || localPart.includes("..")) return null;
  const lowerLocal = localPart.toLowerCase();
  return { email: `${lowerLocal}@${domain}`, localPart: lowerLocal, domain };
}

export function parseDomain(raw: string): string | null {
  if (typeof raw !== "string" || raw.length === 0 || raw.length > 253) return null;
  const domain = raw.toLowerCase();
  const labels = domain.split(".");
  if (labels.length < 2 || !labels.every((label) => domainLabel.test(label))) return null;
  return domain;
}
