import type { Insertable, Kysely, Selectable, SelectType } from "kysely";
import { sql } from "kysely";
import type { Database } from "../db/schema.ts";

/**
 * Writes to a table the caller names, typed by that table's row types in db/schema.ts: the
 * importers write every table the same way, and a renamed column fails the build where their rows
 * are made. Kysely's builders cannot follow a table chosen by a type parameter through `where` and
 * `set`, so those two statements are written with `sql` over the same typed signatures.
 */

export type Column<T extends keyof Database> = keyof Database[T] & string;

/** A text column of a table: what the importers find a row by. */
export type TextColumn<T extends keyof Database> = {
  [C in Column<T>]: SelectType<Database[T][C]> extends string ? C : never;
}[Column<T>] &
  string;

/** Inserts rows in statements of at most ~30,000 bound values (SQLite's limit is 32,766). */
export async function insertRows<T extends keyof Database>(
  db: Kysely<Database>,
  table: T,
  rows: Insertable<Database[T]>[],
): Promise<void> {
  const perStatement = Math.max(1, Math.floor(30000 / Math.max(1, Object.keys(rows[0] ?? {}).length)));
  for (let i = 0; i < rows.length; i += perStatement)
    await db
      .insertInto(table)
      .values(rows.slice(i, i + perStatement))
      .execute();
}

/** The rows whose `key` is one of `keys`: `select *` of the table, so its Selectable rows. */
export async function rowsByKey<T extends keyof Database>(
  db: Kysely<Database>,
  table: T,
  key: TextColumn<T>,
  keys: readonly string[],
): Promise<Selectable<Database[T]>[]> {
  if (keys.length === 0) return [];
  const query = sql<
    Selectable<Database[T]>
  >`select * from ${sql.table(table)} where ${sql.ref(key)} in (${sql.join(keys)})`;
  return (await query.execute(db)).rows;
}

/** Sets the given columns of the row whose `key` is `value`. */
export async function updateByKey<T extends keyof Database>(
  db: Kysely<Database>,
  table: T,
  key: TextColumn<T>,
  value: string,
  changes: Partial<Insertable<Database[T]>>,
): Promise<void> {
  const set = Object.entries(changes)
    .filter(([, v]) => v !== undefined)
    .map(([column, v]) => sql`${sql.ref(column)} = ${v}`);
  if (set.length === 0) return;
  await sql`update ${sql.table(table)} set ${sql.join(set)} where ${sql.ref(key)} = ${value}`.execute(db);
}

/** The columns of `wanted` whose value differs from `stored`'s (flags and numbers as any driver reads them). */
export function changedColumns<R extends object>(
  stored: object,
  wanted: R,
  skip: readonly string[] = [],
): (keyof R & string)[] {
  const storedValues: Readonly<Record<string, unknown>> = { ...stored };
  const changed: (keyof R & string)[] = [];
  for (const column in wanted)
    if (!skip.includes(column) && !same(storedValues[column], wanted[column])) changed.push(column);
  return changed;
}

/** Stored and wanted values are the same (flags and numbers as any driver reads them). */
function same(stored: unknown, wanted: unknown): boolean {
  if (wanted === null || wanted === undefined) return stored === null || stored === undefined;
  if (stored === null || stored === undefined) return false;
  if (typeof stored === "boolean") return Number(stored) === wanted;
  if (typeof wanted === "number") return Number(stored) === wanted;
  return stored === wanted;
}

/** The named columns of a row, as an update sets them. */
export function pick<R extends object>(row: R, columns: readonly (keyof R)[]): Partial<R> {
  const picked: Partial<R> = {};
  for (const column of columns) picked[column] = row[column];
  return picked;
}
