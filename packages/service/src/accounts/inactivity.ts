import type { Expression, ExpressionBuilder, SqlBool } from "kysely";
import type { Database } from "../db/schema.ts";

/**
 * The inactivity rule: no sign-in since `cutoff` (Unix seconds); a user who never signed in counts
 * from its creation. The retention list (two years) and the inactive-user job (the setting's period)
 * use it; the job's deletion re-checks it in the statement that deletes, so a user who signs in
 * meanwhile is kept.
 */
export const inactiveSince =
  (cutoff: number) =>
  (eb: ExpressionBuilder<Database, "users">): Expression<SqlBool> =>
    eb.or([
      eb("last_login_time", "<=", cutoff),
      eb.and([eb("last_login_time", "is", null), eb("created_at", "<=", cutoff)]),
    ]);
