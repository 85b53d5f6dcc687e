/**
 * Address validation and placeholder substitution. Every address that reaches a shell command or a
 * file path passes parseAddress first; every substituted value is shell-quoted as well, so either
 * guard alone keeps an address from running anything.
 */

export interface Address {
  /** The address as received. */
  email: string;
  localPart: string;
  domain: string;
  /** Lower-cased address, used to compare entries (the service compares case-insensitively). */
  key: string;
}

export type AddressCheck = { ok: true; address: Address } | { ok: false; reason: string };

// Letters, digits and marks of any script, plus "_", "+", "=" and "-"; dots only between atoms.
const LOCAL_ATOM = "[\\p{L}\\p{M}\\p{N}_+=-]+";
const LOCAL_PART = new RegExp(`^${LOCAL_ATOM}(?:\\.${LOCAL_ATOM})*$`, "u");
const DOMAIN_LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{M}\p{N}-]*[\p{L}\p{M}\p{N}])?$/u;
const SPECIAL = /[\p{Cc}\p{Cf}\p{Z}\s"'`\\$;&|<>(){}[\]!#*?~^%,:/]/u;

/**
 * Accepts only plain addresses: one "@", a non-empty local part of letters, digits and `_+=-` with
 * dots between atoms (so never "." or ".." and never a leading "-"), and a host name as domain. This
 * excludes whitespace, quotes, backslashes, shell metacharacters, glob wildcards (`*`, `?`, `[`),
 * path separators and control characters.
 */
export function parseAddress(value: unknown): AddressCheck {
  if (typeof value !== "string") return { ok: false, reason: "address is not a string" };
  if (value === "") return { ok: false, reason: "address is empty" };
  if (value.length > 254) return { ok: false, reason: "address is longer than 254 characters" };
  const special = SPECIAL.exec(value);
  if (special) {
    return { ok: false, reason: `address contains a forbidden character ${JSON.stringify(special[0])}` };
  }
  const parts = value.split("@");
  if (parts.length !== 2) return { ok: false, reason: 'address must contain exactly one "@"' };
  const [localPart, domain] = parts as [string, string];
  if (localPart === "") return { ok: false, reason: "local part is empty" };
  if (domain === "") return { ok: false, reason: "domain is empty" };
  if (localPart.length > 64) return { ok: false, reason: "local part is longer than 64 characters" };
  if (!LOCAL_PART.test(localPart) || localPart.startsWith("-")) {
    return { ok: false, reason: "local part is not a plain dot-atom (letters, digits, _ + = -)" };
  }
  const labels = domain.split(".");
  if (labels.some((label) => label.length > 63 || !DOMAIN_LABEL.test(label))) {
    return { ok: false, reason: "domain is not a valid host name" };
  }
  return { ok: true, address: { email: value, localPart, domain, key: value.toLowerCase() } };
}

/** Quotes a value as one POSIX shell word: `it's` -> `'it'\''s'`. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

export type PlaceholderValues = Record<string, string>;

export function addressPlaceholders(address: Address): PlaceholderValues {
  return { email: address.email, domain: address.domain, local_part: address.localPart };
}

const PLACEHOLDER = /\{(email|domain|local_part)\}/y;

/**
 * Replaces {email}, {domain} and {local_part} in a /bin/sh command with quoted values. The template is
 * scanned for the quoting context of each placeholder, so that the shell sees exactly the value in
 * every position: bare words (`-u {email}` -> `-u 'a@b'`), inside double quotes
 * (`"/var/vmail/{domain}"` -> `"/var/vmail/"'b'""`) and inside single quotes (closed and reopened the
 * same way).
 */
export function renderCommand(template: string, values: PlaceholderValues): string {
  let out = "";
  let state: "plain" | "single" | "double" = "plain";
  let i = 0;
  while (i < template.length) {
    const ch = template[i] as string;
    if (ch === "{") {
      PLACEHOLDER.lastIndex = i;
      const match = PLACEHOLDER.exec(template);
      const value = match ? values[match[1] as string] : undefined;
      if (match && value !== undefined) {
        const quoted = shellQuote(value);
        out += state === "plain" ? quoted : state === "single" ? `'${quoted}'` : `"${quoted}"`;
        i += match[0].length;
        continue;
      }
    }
    if (ch === "\\" && state !== "single") {
      out += template.slice(i, i + 2);
      i += 2;
      continue;
    }
    if (state === "plain" && ch === "'") state = "single";
    else if (state === "plain" && ch === '"') state = "double";
    else if (state === "single" && ch === "'") state = "plain";
    else if (state === "double" && ch === '"') state = "plain";
    out += ch;
    i += 1;
  }
  return out;
}

/** Substitutes placeholders into a file path template (no shell involved, values used verbatim). */
export function renderPath(template: string, values: PlaceholderValues): string {
  return template.replace(/\{(email|domain|local_part)\}/g, (whole, name: string) => values[name] ?? whole);
}
