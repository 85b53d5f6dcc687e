import type { Expression, ExpressionBuilder, Kysely, Selectable, SqlBool, Transaction } from "kysely";
import { type Database, toFlag, type UserTable } from "../db/schema.ts";
import { parseDomain } from "./addresses.ts";
import type {
  SecurityEventLog,
  SecurityEventOrigin,
  SecurityEventSubject,
  SessionsEndedBecause,
} from "./security-events.ts";

/**
 * The two questions asked everywhere, each answered by one query (and one condition, for queries that
 * ask them among other things, such as the lookups' batches): is this domain managed here, is this
 * an active user.
 */

const activeFlag = toFlag(false);

/** The condition "an active user": not (soft-)deleted. */
export const isActiveUser = (eb: ExpressionBuilder<Database, "users">): Expression<SqlBool> =>
  eb("users.deleted", "=", activeFlag);

/** The condition "the managed domain of this (already normalised) name". */
export const isManagedDomainNamed =
  (name: string) =>
  (eb: ExpressionBuilder<Database, "domains">): Expression<SqlBool> =>
    eb("domains.name", "=", name);

export interface ManagedDomain {
  id: number;
  name: string;
  createdAt: number;
  updatedAt: number;
}

/** The managed domain of this name (any spelling a lookup may bring), or null. */
export async function managedDomain(db: Kysely<Database>, rawName: string): Promise<ManagedDomain | null> {
  const name = parseDomain(rawName);
  if (!name) return null;
  const row = await db
    .selectFrom("domains")
    .select(["id", "name", "created_at", "updated_at"])
    .where(isManagedDomainNamed(name))
    .executeTakeFirst();
  return row ? { id: row.id, name: row.name, createdAt: row.created_at, updatedAt: row.updated_at } : null;
}

/** The row of the active user with this (already normalised) address, or undefined. */
export const activeUserRow = (
  db: Kysely<Database>,
  email: string,
): Promise<Selectable<UserTable> | undefined> =>
  db.selectFrom("users").selectAll().where("email", "=", email).where(isActiveUser).executeTakeFirst();

/**
 * A change of credentials (password change, reset, recovery, second factor switched on, deletion)
 * or a request to sign out everywhere ends the user's web sessions, all but the one it was made in,
 * if any: whoever held the old password is signed out. When any ended, `sessions.ended` is
 * recorded in the same transaction. Returns how many ended.
 */
export async function endWebSessions(
  trx: Transaction<Database>,
  securityEvents: SecurityEventLog,
  ended: {
    user: SecurityEventSubject & { id: number };
    origin: SecurityEventOrigin;
    because: SessionsEndedBecause;
  },
  keepIdHash?: string,
): Promise<number> {
  let query = trx.deleteFrom("web_sessions").where("user_id", "=", ended.user.id);
  if (keepIdHash) query = query.where("id_hash", "!=", keepIdHash);
  const result = await query.executeTakeFirst();
  const sessions = Number(result.numDeletedRows);
  if (sessions > 0)
    await securityEvents.record(trx, ended.user, ended.origin, {
      type: "sessions.ended",
      detail: { sessions, because: ended.because },
    });
  return sessions;
}
