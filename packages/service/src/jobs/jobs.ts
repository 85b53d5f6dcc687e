import type { Kysely } from "kysely";
import { inactiveSince, inactivityCutoffs } from "../accounts/inactivity.ts";
import type { InactiveDeletion, LifecycleService } from "../accounts/lifecycle.ts";
import { isActiveUser } from "../accounts/queries.ts";
import { isExemptFromInactivityDeletion, parseStoredRoles } from "../accounts/roles.ts";
import { SecurityEventLog } from "../accounts/security-events.ts";
import { pruneWebSessions } from "../accounts/session-lifetimes.ts";
import type { SettingsService } from "../accounts/settings.ts";
import { SignInGuard } from "../accounts/sign-in-guard.ts";
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
 * Deletes users inactive for `inactive_user_days` + `inactive_user_removal_grace_days` (2 years + 7
 * days; `inactivityCutoffs`, the same periods as the retention list), through
 * the normal deletion path; admins, domain admins and permanent users are kept. Each candidate is
 * deleted by `LifecycleService.deleteIfInactive`, which checks exemption and inactivity again in the
 * transaction that deletes: a user who signs in after the selection is skipped, not deleted.
 */
export async function removeInactiveUsers(
  { db, logger, settings, lifecycle, clock }: JobDependencies,
  /** dryRun: only report each candidate (`remove` or `exempt`) and write nothing. */
  options: { dryRun?: boolean; report?: (email: string, verdict: "remove" | "exempt") => void } = {},
): Promise<string> {
  const now = clock ? Math.floor(clock() / 1000) : nowSeconds();
  const cutoff = (await inactivityCutoffs(settings, now)).removed;
  const candidates = await db
    .selectFrom("users")
    .select(["email", "roles"])
    .where(isActiveUser)
    .where(inactiveSince(cutoff))
    .orderBy("id")
    .execute();
  if (options.dryRun) {
    let removed = 0;
    for (const candidate of candidates) {
      const exempt = isExemptFromInactivityDeletion(parseStoredRoles(candidate.roles));
      if (!exempt) removed++;
      options.report?.(candidate.email, exempt ? "exempt" : "remove");
    }
    return `would delete ${removed}, keep ${candidates.length - removed} exempt (dry run, nothing written)`;
  }
  const counts: Record<InactiveDeletion, number> = { deleted: 0, exempt: 0, skipped: 0 };
  for (const candidate of candidates) {
    try {
      const outcome = await lifecycle.deleteIfInactive(candidate.email, cutoff);
      counts[outcome]++;
      // Signed in, roles changed or deleted meanwhile (another instance, an admin).
      if (outcome === "skipped") logger.info({ user: candidate.email }, "inactive user no longer inactive");
    } catch (error) {
      counts.skipped++;
      logger.warn({ user: candidate.email, err: String(error) }, "inactive user not deleted");
    }
  }
  return `deleted ${counts.deleted}, kept ${counts.exempt} exempt, skipped ${counts.skipped}`;
}

export function scheduledJobs(deps: JobDependencies): Job[] {
  return [
    { name: "remove-inactive-users", periodSeconds: day, run: () => removeInactiveUsers(deps) },
    {
      name: "prune-sign-in-state",
      periodSeconds: day,
      run: async () => {
        const now = deps.clock ? Math.floor(deps.clock() / 1000) : nowSeconds();
        const sessions = await pruneWebSessions(deps.db, deps.settings, now);
        const counters = await new SignInGuard(deps.db).forgetOld(now);
        const days = await deps.settings.get("security_event_days");
        const events = await new SecurityEventLog(deps.db).prune(days, now);
        return `removed ${sessions} expired web sessions, ${counters} old sign-in failure counters and ${events} security events older than ${days} days`;
      },
    },
    {
      name: "prune-webhook-deliveries",
      periodSeconds: day,
      run: async () =>
        `pruned ${await deps.webhooks.pruneDelivered(14, deps.clock ? Math.floor(deps.clock() / 1000) : undefined)}`,
    },
  ];
}
