import { checkAddress, wildcardIn } from "./address-syntax.ts";

/**
 * Address validation and placeholder substitution. Every address that reaches a file path passes
 * parseAddress first (the service's rule for known addresses, address-syntax.ts), and every address
 * that reaches a purge command passes parsePurgeAddress (that rule and no wildcard); every
 * substituted value is shell-quoted as well.
 */

export interface Address {
  /** The address as received. */
  email: string;
  localPart: string;
  domain: string;
  /** The address in the service's stored form (lower-cased), used to compare entries. */
  key: string;
}

export type AddressCheck = { ok: true; address: Address } | { ok: false; reason: string };

/**
 * Accepts every address the service can hold (its rule for known addresses): one "@", dot-atoms
 * without "/", "#" or a leading "-", a host name as domain, no control or format characters, no
 * spaces, quotes, backslashes or path separators. Symbols such as `'`, `$` or `~` are accepted: the
 * service could create them before, and every substituted value is shell-quoted. The toucher uses it
 * as it is (a Sieve path is read without a shell or a pattern); purges need parsePurgeAddress.
 */
export function parseAddress(value: unknown): AddressCheck {
  const check = checkAddress(value, "known");
  if (!check.ok) return check;
  const text = value as string;
  const at = text.indexOf("@");
  return {
    ok: true,
    address: {
      email: text,
      localPart: text.slice(0, at),
      domain: text.slice(at + 1),
      key: check.address.email,
    },
  };
}

/**
 * The address check for everything that may end in PURGER_COMMAND (a webhook on receipt, a line of
 * the pending deletions file, the purge itself): parseAddress, and no character a purge tool reads
 * as a wildcard (address-syntax.ts, wildcardIn). Quoting cannot help there: `doveadm -u 'a*@b'` still
 * takes `a*@b` as a mask of many users.
 */
export function parsePurgeAddress(value: unknown): AddressCheck {
  const check = parseAddress(value);
  if (!check.ok) return check;
  const wildcard = wildcardIn(check.address.email);
  if (wildcard !== null)
    return { ok: false, reason: `address holds ${wildcard}, which a purge tool reads as a wildcard` };
  return check;
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
