import type { Kysely } from "kysely";
import type { LifecycleService } from "../accounts/lifecycle.ts";
import { isExemptFromInactivityDeletion, parseStoredRoles } from "../accounts/roles.ts";
import type { SettingsService } from "../accounts/settings.ts";
import { nowSeconds } from "../accounts/users.ts";
import type { Database } from "../db/schema.ts";
import type { Logger } from "../logger.ts";
import type { WebhookService } from "../webhooks/endpoints.ts";
import type { Job } from "./scheduler.ts";

const day = 86400;

export interface JobDependencies {
  db: Kysely<Database>;
  logger: Logger;
  settings: SettingsService;
  lifecycle: LifecycleService;
  webhooks: WebhookService;
  clock?: () => number;
}

/**
 * Deletes users without a sign-in for the `inactive_user_days` setting (2 years + 7 days), through
 * the normal deletion path; admins, domain admins and permanent users are kept.
 */
export async function removeInactiveUsers({
  db,
  logger,
  settings,
  lifecycle,
  clock,
}: JobDependencies): Promise<string> {
  const now = clock ? Math.floor(clock() / 1000) : nowSeconds();
  const cutoff = now - (await settings.get("inactive_user_days")) * day;
  const candidates = await db
    .selectFrom("users")
    .select(["email", "roles"])
    .where("deleted", "=", 0)
    .where((eb) =>
      eb.or([
        eb("last_login_time", "<=", cutoff),
        eb.and([eb("last_login_time", "is", null), eb("created_at", "<=", cutoff)]),
      ]),
    )
    .orderBy("id")
    .execute();
  let deleted = 0;
  let kept = 0;
  let failed = 0;
  for (const candidate of candidates) {
    if (isExemptFromInactivityDeletion(parseStoredRoles(candidate.roles))) {
      kept++;
      continue;
    }
    try {
      await lifecycle.delete(candidate.email);
      deleted++;
    } catch (error) {
      // Signed in or deleted meanwhile (another instance, an admin): nothing to do for this one.
      failed++;
      logger.warn({ user: candidate.email, err: String(error) }, "inactive user not deleted");
    }
  }
  return `deleted ${deleted}, kept ${kept} exempt, skipped ${failed}`;
}

export function scheduledJobs(deps: JobDependencies): Job[] {
  return [
    { name: "remove-inactive-users", periodSeconds: day, run: () => removeInactiveUsers(deps) },
    {
      name: "prune-webhook-deliveries",
      periodSeconds: day,
      run: async () =>
        `pruned ${await deps.webhooks.pruneDelivered(14, deps.clock ? Math.floor(deps.clock() / 1000) : undefined)}`,
    },
  ];
}
