import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";

const secondsPerDay = 86400;

/**
 * 00:00 UTC of the day of `now`. Sign-ins and restores record last login at day granularity: enough
 * for the inactivity periods (counted in days), less revealing than exact times, and at most one
 * write per user a day.
 */
export const activityDay = (now: number): number => Math.floor(now / secondsPerDay) * secondsPerDay;

/**
 * What last login records:
 * - `sign-in` (every password sign-in) and `restore`: the day (`activityDay`), if newer;
 * - `reported` (the retention touch; activity seen on the mail server): the exact time, if newer;
 * - `corrected` (an admin's explicit value): exactly that value, null included, even if older.
 */
export type Activity =
  | { kind: "sign-in" }
  | { kind: "restore" }
  | { kind: "reported"; at: number }
  | { kind: "corrected"; at: number | null };

/**
 * The one writer of `users.last_login_time`. For newer-only kinds the statement itself requires the
 * stored value to be older, so concurrent writers never move it backwards; when the caller knows the
 * stored value (`user.lastLoginTime`) and it is already as new, nothing is written.
 */
export async function recordActivity(
  db: Kysely<Database>,
  user: { id: number; lastLoginTime?: number | null },
  activity: Activity,
  now: number = Math.floor(Date.now() / 1000),
): Promise<void> {
  if (activity.kind === "corrected") {
    await db.updateTable("users").set({ last_login_time: activity.at }).where("id", "=", user.id).execute();
    return;
  }
  const time = activity.kind === "reported" ? activity.at : activityDay(now);
  if (user.lastLoginTime != null && user.lastLoginTime >= time) return;
  await db
    .updateTable("users")
    .set({ last_login_time: time })
    .where("id", "=", user.id)
    .where((eb) => eb.or([eb("last_login_time", "is", null), eb("last_login_time", "<", time)]))
    .execute();
}
