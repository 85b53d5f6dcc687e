import { type RawBuilder, sql } from "kysely";
import { invalid } from "../errors.ts";

export interface Page {
  search: string;
  limit: number;
  offset: number;
}

export interface Listing<T> {
  items: T[];
  total: number;
}

/** `search`, `limit` (default 50, at most 500) and `offset` of every admin list. */
export function readPage(query: Record<string, unknown>): Page {
  const number = (name: string, fallback: number, max: number) => {
    const raw = query[name];
    if (raw === undefined || raw === "") return fallback;
    if (typeof raw !== "string" || !/^\d{1,9}$/.test(raw)) throw invalid(`${name}: must be a whole number`);
    const value = Number(raw);
    if (value > max) throw invalid(`${name}: at most ${max}`);
    return value;
  };
  const search = typeof query.search === "string" ? query.search.trim().slice(0, 254) : "";
  return { search, limit: number("limit", 50, 500), offset: number("offset", 0, 1_000_000_000) };
}

/**
 * `column LIKE '%text%'` with the text's own wildcards escaped. The escape character is `!`,
 * which needs no quoting in any of the three dialects (a backslash does in MariaDB).
 */
export function containsText(column: string, text: string): RawBuilder<boolean> {
  const pattern = `%${text.toLowerCase().replace(/[!%_]/g, (c) => `!${c}`)}%`;
  return sql<boolean>`${sql.ref(column)} LIKE ${pattern} ESCAPE '!'`;
}
