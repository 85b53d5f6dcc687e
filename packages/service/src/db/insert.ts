import type { Insertable, Kysely } from "kysely";
import type { Database } from "./schema.ts";

type TableWithId = {
  [T in keyof Database]: Database[T] extends { id: unknown } ? T : never;
}[keyof Database];

/**
 * Inserts one row and returns its generated id: RETURNING where the dialect supports it
 * (PostgreSQL, SQLite), the connection's insert id otherwise (MariaDB).
 */
export async function insertReturningId<T extends TableWithId>(
  db: Kysely<Database>,
  table: T,
  values: Insertable<Database[T]>,
): Promise<number> {
  const query = db.insertInto(table).values(values as never);
  if (db.getExecutor().adapter.supportsReturning) {
    const row = (await query.returning("id" as never).executeTakeFirstOrThrow()) as unknown as { id: number };
    return Number(row.id);
  }
  const result = await query.executeTakeFirstOrThrow();
  return Number(result.insertId);
}
