import type { Kysely, Transaction } from "kysely";
import type { Database } from "./schema.ts";

/**
 * `work` inside the caller's transaction when there is one, in a transaction of its own otherwise:
 * how a service function joins a larger unit (an admin action with its audit entry) and still
 * stands alone for the console and the other surfaces. Inside, use only `trx`: on SQLite a query
 * on the root handle would wait for this very transaction.
 */
export function inTransaction<T>(
  db: Kysely<Database>,
  trx: Transaction<Database> | undefined,
  work: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  return trx ? work(trx) : db.transaction().execute(work);
}
