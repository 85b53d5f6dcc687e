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
  const lifetimes = await settings.some(["web_session_idle_minutes", "web_session_lifetime_hours"]);
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
