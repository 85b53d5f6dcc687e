/**
 * Keyset paging of the admin lists, newest (highest id) first: a page is "the next N below this
 * id" or "the next N above it", never an OFFSET, so the last page of 100,000 users costs what the
 * first does (an index range, not a walk over every row before it).
 */

import { type SelectQueryBuilder, sql } from "kysely";

/** A place in a list: the page after (older than) or before (newer than) an id; neither: the first page. */
export interface ListCursor {
  after?: number;
  before?: number;
}

export interface KeysetPage<T> {
  items: T[];
  /** All matches, not only this page; with `totalAtLeast`, a lower bound (a count that stopped). */
  total: number;
  totalAtLeast: boolean;
  /** Cursor (`before`) of the page with newer entries, or null on the first page. */
  newer: number | null;
  /** Cursor (`after`) of the page with older entries, or null on the last page. */
  older: number | null;
}

/** Whether the page is read upwards (a `before` cursor): ascending, then reversed. */
export const readsBackwards = (cursor: ListCursor): boolean =>
  cursor.before !== undefined && cursor.after === undefined;

/**
 * The query limited to the cursor's range of `idColumn` and read in its direction, `limit + 1`
 * rows (the extra one only says "there is more"): the same for every admin list.
 */
export function inCursorOrder<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  idColumn: string,
  cursor: ListCursor,
  limit: number,
): SelectQueryBuilder<DB, TB, O> {
  const id = sql.ref<number>(idColumn);
  const limited = query.limit(limit + 1);
  if (readsBackwards(cursor)) return limited.where(id, ">", cursor.before as number).orderBy(id, "asc");
  const below = cursor.after !== undefined ? limited.where(id, "<", cursor.after) : limited;
  return below.orderBy(id, "desc");
}

/**
 * The page from `limit + 1` rows read in the cursor's direction (the extra row only says "there
 * is more"), and the cursors of its neighbours.
 */
export function keysetPage<T extends { id: number }>(
  rows: T[],
  limit: number,
  cursor: ListCursor,
  total: number,
  totalAtLeast = false,
): KeysetPage<T> {
  const backwards = readsBackwards(cursor);
  const more = rows.length > limit;
  const items = rows.slice(0, limit);
  if (backwards) items.reverse();
  const first = items[0]?.id ?? null;
  const last = items.at(-1)?.id ?? null;
  return {
    items,
    total,
    totalAtLeast,
    newer: backwards ? (more ? first : null) : cursor.after !== undefined ? first : null,
    older: backwards ? last : more ? last : null,
  };
}
