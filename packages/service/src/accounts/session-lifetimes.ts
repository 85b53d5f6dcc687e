import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import type { SettingsService } from "./settings.ts";

/**
 * The one rule for how long a web session lives: it ends `web_session_idle_minutes` after its last
 * request and `web_session_lifetime_hours` after sign-in, whichever comes first. The session check
 * of every page and the cleanup job both ask here.
 */
export async function webSessionCutoffs(
  settings: SettingsService,
  now: number,
): Promise<{ lastSeenAfter: number; createdAfter: number }> {
  return cutoffsOf(await settings.some(webSessionLifetimes), now);
}

/** The two settings of the rule, for a caller that reads them in its own statement (`storedSetting`). */
export const webSessionLifetimes = ["web_session_idle_minutes", "web_session_lifetime_hours"] as const;

/** The rule itself, from the two settings' values. */
export function cutoffsOf(
  lifetimes: { web_session_idle_minutes: number; web_session_lifetime_hours: number },
  now: number,
): { lastSeenAfter: number; createdAfter: number } {
  return {
    lastSeenAfter: now - lifetimes.web_session_idle_minutes * 60,
    createdAfter: now - lifetimes.web_session_lifetime_hours * 3600,
  };
}

/** Removes the sessions past either lifetime (the cleanup job); returns how many. */
export async function pruneWebSessions(db: Kysely<Database>, settings: SettingsService, now: number) {
  const { lastSeenAfter, createdAfter } = await webSessionCutoffs(settings, now);
  const result = await db
    .deleteFrom("web_sessions")
    .where((eb) => eb.or([eb("last_seen_at", "<=", lastSeenAfter), eb("created_at", "<=", createdAfter)]))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
