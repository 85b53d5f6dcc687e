import type BetterSqlite3 from "better-sqlite3";
import type { SqliteDatabase, SqliteStatement } from "kysely";

/** Statements kept at most: every query shape of the code, each length of an `in (...)` list. */
export const keptStatementLimit = 500;

/**
 * The SQLite database as Kysely's dialect sees it: better-sqlite3's, with each distinct SQL text
 * prepared once and kept, the least recently used dropped past `limit`. Kysely's driver prepares
 * every query anew, and on SQLite preparing costs more than running a keyed query (bench/README.md,
 * "Statements prepared once on SQLite").
 *
 * Safe to share: Kysely runs one query at a time on this connection (a stream holds it until it
 * ends), better-sqlite3 runs each synchronously, and SQLite prepares a kept statement again by
 * itself when the schema has changed since (a migration).
 */
export function withKeptStatements(
  sqlite: BetterSqlite3.Database,
  limit = keptStatementLimit,
): SqliteDatabase & { readonly kept: number } {
  const statements = new Map<string, SqliteStatement>();
  return {
    get kept() {
      return statements.size;
    },
    close() {
      statements.clear();
      sqlite.close();
    },
    prepare(sql: string): SqliteStatement {
      let statement = statements.get(sql);
      if (statement) {
        // Most recently used last: Map keeps insertion order.
        statements.delete(sql);
        statements.set(sql, statement);
        return statement;
      }
      statement = sqlite.prepare(sql);
      statements.set(sql, statement);
      if (statements.size > limit) {
        const oldest = statements.keys().next().value;
        if (oldest !== undefined) statements.delete(oldest);
      }
      return statement;
    },
  };
}
