/**
 * The address rule of the mail account service and its mailbox janitor. This file exists twice,
 * byte for byte: packages/service/src/accounts/address-syntax.ts and
 * packages/janitor/src/address-syntax.ts (the janitor runs on the mail server and imports nothing of
 * the service); a test keeps the copies identical, and both run the cases of
 * packages/janitor/test/address-cases.json.
 *
 * Two levels:
 * - NEW addresses (users and alias sources the service creates; domains it starts managing):
 *   ASCII only. Local part: dot-atoms of letters, digits and `_ + = -`, not starting with `-`;
 *   domain: host-name labels of letters, digits and `-` (an international domain in its `xn--`
 *   form). Case is folded, so `Alice@Example.ORG` is `alice@example.org`. Nothing a mail server, a
 *   shell or a file path treats specially, and no look-alike letters of other scripts.
 * - KNOWN addresses (every lookup; what the janitor accepts; alias destinations, which may be
 *   outside): dot-atoms of letters, marks and digits of any script and the symbols
 *   `_ + = - ! $ % & ' * ? ^ \` { | } ~`, not starting with `-`; domain labels of letters, marks,
 *   digits and `-`. This takes every address older versions could create, except those with `/`, `#`
 *   (a path separator; a comment in the janitor's file) and a leading `-` (an option to a command).
 *   The janitor shell-quotes every value it substitutes, so these symbols are safe in the shell's
 *   own parsing; but a tool may still read some of them as a pattern (see wildcardIn).
 * Both: at most 64 characters before the `@`, 254 in all, at least two domain labels; the input must
 * be in Unicode NFC and must not hold a non-ASCII character whose lower case is ASCII (the Kelvin
 * sign U+212A would become `k`): such spellings of an address are refused, never folded into another.
 * Every NEW address is a KNOWN one.
 */

/**
 * The characters a purge tool reads as a pattern or a variable even when the shell has passed them
 * on quoted: `*` and `?` (shell globs, doveadm's user masks and mailbox names), `[` and `]` (shell
 * bracket expressions), `%` (IMAP LIST and doveadm mailbox wildcards, Dovecot's variables, SQL
 * LIKE). No NEW address holds one; a KNOWN address may (older versions created them), and then it is
 * never handed to a purge command (the janitor) nor imported (the userli importer).
 */
const WILDCARD = /[*?%[\]]/;

/** The first wildcard character of an address (see WILDCARD), or null when it holds none. */
export function wildcardIn(value: string): string | null {
  return WILDCARD.exec(value)?.[0] ?? null;
}

export interface CheckedAddress {
  /** The address in its one stored form: lower-cased. */
  email: string;
  localPart: string;
  domain: string;
}

export type AddressCheck = { ok: true; address: CheckedAddress } | { ok: false; reason: string };
export type DomainCheck = { ok: true; domain: string } | { ok: false; reason: string };

const NEW_ATOM = "[A-Za-z0-9_+=-]+";
const NEW_LOCAL_PART = new RegExp(`^${NEW_ATOM}(?:\\.${NEW_ATOM})*$`);
const NEW_LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const KNOWN_ATOM = "[\\p{L}\\p{M}\\p{N}_+=!$%&'*?^`{|}~-]+";
const KNOWN_LOCAL_PART = new RegExp(`^${KNOWN_ATOM}(?:\\.${KNOWN_ATOM})*$`, "u");
const KNOWN_LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{M}\p{N}-]{0,61}[\p{L}\p{M}\p{N}])?$/u;
const ASCII_TEXT = /^[^\u0080-\uffff]*$/;
const isAscii = (text: string): boolean => ASCII_TEXT.test(text);
/** The stored form: lower case, NFC (ASCII is NFC already, and the common case skips the work). */
const folded = (text: string): string =>
  isAscii(text) ? text.toLowerCase() : text.toLowerCase().normalize("NFC");

export type AddressLevel = "new" | "known";

/** Checks an address at one level; the result is its stored (lower-case) form. */
export function checkAddress(value: unknown, level: AddressLevel): AddressCheck {
  if (typeof value !== "string") return { ok: false, reason: "address is not a string" };
  if (value === "") return { ok: false, reason: "address is empty" };
  if (value.length > 254) return { ok: false, reason: "address is longer than 254 characters" };
  const text = checkText(value, level);
  if (text !== null) return { ok: false, reason: text };
  const at = value.indexOf("@");
  if (at < 0 || value.indexOf("@", at + 1) >= 0)
    return { ok: false, reason: 'address must contain exactly one "@"' };
  const localPart = value.slice(0, at);
  if (localPart === "") return { ok: false, reason: "local part is empty" };
  if (localPart.length > 64) return { ok: false, reason: "local part is longer than 64 characters" };
  const pattern = level === "new" ? NEW_LOCAL_PART : KNOWN_LOCAL_PART;
  if (!pattern.test(localPart) || localPart.startsWith("-")) {
    return {
      ok: false,
      reason:
        level === "new"
          ? "local part must be dot-separated ASCII letters, digits and _ + = - (not starting with -)"
          : "local part is not a plain dot-atom",
    };
  }
  const domain = checkDomain(value.slice(at + 1), level);
  if (!domain.ok) return domain;
  const lower = folded(localPart);
  return {
    ok: true,
    address: { email: `${lower}@${domain.domain}`, localPart: lower, domain: domain.domain },
  };
}

/** Checks a domain name at one level; the result is its stored (lower-case) form. */
export function checkDomain(value: unknown, level: AddressLevel): DomainCheck {
  if (typeof value !== "string" || value === "") return { ok: false, reason: "domain is empty" };
  if (value.length > 253) return { ok: false, reason: "domain is longer than 253 characters" };
  const text = checkText(value, level);
  if (text !== null) return { ok: false, reason: text };
  const labels = value.split(".");
  const label = level === "new" ? NEW_LABEL : KNOWN_LABEL;
  if (labels.length < 2 || !labels.every((l) => label.test(l))) {
    return {
      ok: false,
      reason:
        level === "new"
          ? "domain must be a host name of ASCII letters, digits and - (international names in xn-- form)"
          : "domain is not a valid host name",
    };
  }
  return { ok: true, domain: folded(value) };
}

/** The checks on the whole text: ASCII for new names; NFC and no case folding into ASCII for all. */
function checkText(value: string, level: AddressLevel): string | null {
  // ASCII text is in NFC and folds into nothing else: most addresses need no further look.
  if (isAscii(value)) return null;
  if (level === "new") return "only ASCII characters are allowed";
  if (value.normalize("NFC") !== value) return "not in Unicode normal form C";
  for (const ch of value) {
    if (!isAscii(ch) && [...ch.toLowerCase()].some(isAscii)) {
      return `the character U+${(ch.codePointAt(0) as number).toString(16).toUpperCase()} folds into ASCII`;
    }
  }
  return null;
}
