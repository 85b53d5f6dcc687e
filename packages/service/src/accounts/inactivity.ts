import type { Expression, ExpressionBuilder, SqlBool } from "kysely";
import type { Database } from "../db/schema.ts";
import type { SettingsService } from "./settings.ts";

const secondsPerDay = 86400;

/**
 * The inactivity rule: no sign-in since `cutoff` (Unix seconds); a user who never signed in counts
 * from its creation. The retention list and the inactive-user job use it with the cutoffs of
 * `inactivityCutoffs`; the job's deletion re-checks it in the statement that deletes, so a user who
 * signs in meanwhile is kept.
 */
export const inactiveSince =
  (cutoff: number) =>
  (eb: ExpressionBuilder<Database, "users">): Expression<SqlBool> =>
    eb.or([
      eb("last_login_time", "<=", cutoff),
      eb.and([eb("last_login_time", "is", null), eb("created_at", "<=", cutoff)]),
    ]);

export interface InactivityCutoffs {
  /** Inactive since this time: listed to the mailbox janitor (`GET /api/retention/users`). */
  listed: number;
  /** Inactive since this time: deleted by the inactive-user job (exempt roles aside). */
  removed: number;
}

/**
 * The two inactivity periods, from one pair of settings: a user is inactive (and listed) after
 * `inactive_user_days` without a sign-in, and removed `inactive_user_removal_grace_days` later, so
 * the janitor always sees a user before the job deletes it (and can touch a forwarding-only one).
 */
export async function inactivityCutoffs(settings: SettingsService, now: number): Promise<InactivityCutoffs> {
  const all = await settings.all();
  const listed = now - all.inactive_user_days * secondsPerDay;
  return { listed, removed: listed - all.inactive_user_removal_grace_days * secondsPerDay };
}
