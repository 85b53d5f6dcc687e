import { type RawBuilder, sql } from "kysely";
import { type RefusalDefinition, type RefusalKind, refusal } from "../errors.ts";

export interface Page {
  search: string;
  limit: number;
  offset: number;
}

export interface Listing<T> {
  items: T[];
  total: number;
}

/**
 * How a surface reads one whole-number query parameter. The rule of the service (docs/api.md,
 * "Bad input"): a value that is not a whole number is refused with the surface's answer (the
 * integration API 400, as userli's clients expect; the admin API 422, like its other fields). A
 * whole number out of range is, as the parameter documents, either refused the same way or taken
 * leniently: a negative one means the default, one above `max` means `max` (userli's paging).
 */
export interface WholeNumberRule {
  fallback: number;
  max: number;
  outOfRange: "lenient" | "refuse";
  refusals: WholeNumberRefusals;
}

export interface WholeNumberRefusals {
  notWhole: RefusalDefinition<{ field: string }>;
  negative: RefusalDefinition<{ field: string }>;
  aboveMax: RefusalDefinition<{ field: string; max: number }>;
}

const wholeNumberRefusals = (prefix: string, kind: RefusalKind): WholeNumberRefusals => ({
  notWhole: refusal<{ field: string }>(
    `${prefix}.not_whole_number`,
    kind,
    ({ field }) => `${field}: must be a whole number`,
  ),
  negative: refusal<{ field: string }>(`${prefix}.negative`, kind, ({ field }) => `${field}: at least 0`),
  aboveMax: refusal<{ field: string; max: number }>(
    `${prefix}.above_max`,
    kind,
    ({ field, max }) => `${field}: at most ${max}`,
  ),
});
/** The integration API's answers (400, as userli's clients expect). */
export const queryNumberRefusals = wholeNumberRefusals("query", "bad_request");
/** The admin API's and the console's answers (422, like their other fields). */
export const fieldNumberRefusals = wholeNumberRefusals("field", "invalid");

/** The one parser of whole-number query parameters: digits with an optional minus, any length. */
export function readWholeNumber(raw: unknown, name: string, rule: WholeNumberRule): number {
  if (raw === undefined || raw === "") return rule.fallback;
  if (typeof raw !== "string" || !/^-?\d+$/.test(raw)) throw rule.refusals.notWhole({ field: name });
  const lenient = rule.outOfRange === "lenient";
  // "-0" is 0; any other minus sign is out of range.
  if (raw.startsWith("-") && /[1-9]/.test(raw)) {
    if (lenient) return rule.fallback;
    throw rule.refusals.negative({ field: name });
  }
  // Past the largest safe integer Number() loses digits, but any such value is above every `max`.
  const value = Math.abs(Number(raw));
  if (value <= rule.max) return value;
  if (lenient) return rule.max;
  throw rule.refusals.aboveMax({ field: name, max: rule.max });
}

/** A search term as every list takes it: trimmed, at most 254 characters (the longest address). */
export function readSearch(raw: unknown): string {
  return typeof raw === "string" ? raw.trim().slice(0, 254) : "";
}

/** `search`, `limit` (default 50, at most 500) and `offset` of every admin list. */
export function readPage(query: Record<string, unknown>): Page {
  return {
    search: readSearch(query.search),
    limit: readWholeNumber(query.limit, "limit", {
      fallback: 50,
      max: 500,
      outOfRange: "refuse",
      refusals: fieldNumberRefusals,
    }),
    offset: readWholeNumber(query.offset, "offset", {
      fallback: 0,
      max: 1_000_000_000,
      outOfRange: "refuse",
      refusals: fieldNumberRefusals,
    }),
  };
}

/**
 * `column LIKE '%text%'` with the text's own wildcards escaped. The escape character is `!`,
 * which needs no quoting in any of the three dialects (a backslash does in MariaDB).
 * A text holding NUL matches nothing: no stored address or domain name contains one, SQLite's LIKE
 * would stop reading the pattern at it (and so match every row), and PostgreSQL refuses it in text.
 */
export function containsText(column: string, text: string): RawBuilder<boolean> {
  if (text.includes("\0")) return sql<boolean>`1 = 0`;
  const pattern = `%${text.toLowerCase().replace(/[!%_]/g, (c) => `!${c}`)}%`;
  return sql<boolean>`${sql.ref(column)} LIKE ${pattern} ESCAPE '!'`;
}
