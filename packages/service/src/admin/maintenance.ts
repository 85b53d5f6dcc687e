import type { Kysely } from "kysely";
import { type Actor, assertMay } from "../accounts/admin-scope.ts";
import type { AuditLog } from "../accounts/audit-log.ts";
import type { LifecycleService } from "../accounts/lifecycle.ts";
import type { SettingsService } from "../accounts/settings.ts";
import type { Database } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { type JobDependencies, removeInactiveUsers, scheduledJobs } from "../jobs/jobs.ts";
import { Scheduler } from "../jobs/scheduler.ts";
import type { Logger } from "../logger.ts";
import type { WebhookService } from "../webhooks/endpoints.ts";

export interface JobInfo {
  name: string;
  periodSeconds: number;
  /** The last scheduled run (any instance), if there was one. */
  lastRun: { startedAt: number; finishedAt: number | null; result: string | null } | null;
}

export interface JobOutcome {
  name: string;
  dryRun: boolean;
  result: string;
  /** The dry run's verdict on each candidate (the inactive-user removal). */
  report: { email: string; verdict: "remove" | "exempt" }[];
}

/** The job that has a dry run: who would go is shown before anyone goes. */
export const dryRunJob = "remove-inactive-users";

/**
 * Maintenance: the scheduled jobs (jobs/jobs.ts), run now by an admin with their result, as the
 * console's app:jobs:run runs them. The inactive-user removal can first be run dry.
 */
export const jobUnknown = refusal<{ name: string; known: string }>(
  "job.unknown",
  "invalid",
  ({ name, known }) => `unknown job ${name} (known: ${known})`,
);
export const jobWithoutDryRun = refusal<{ name: string }>(
  "job.no_dry_run",
  "invalid",
  ({ name }) => `job ${name} has no dry run`,
);

export class AdminMaintenance {
  readonly #db: Kysely<Database>;
  readonly #settings: SettingsService;
  readonly #lifecycle: LifecycleService;
  readonly #webhooks: WebhookService;
  readonly #audit: AuditLog;

  constructor(
    db: Kysely<Database>,
    settings: SettingsService,
    lifecycle: LifecycleService,
    webhooks: WebhookService,
    audit: AuditLog,
  ) {
    this.#db = db;
    this.#settings = settings;
    this.#lifecycle = lifecycle;
    this.#webhooks = webhooks;
    this.#audit = audit;
  }

  #deps(logger: Logger): JobDependencies {
    return {
      db: this.#db,
      logger,
      settings: this.#settings,
      lifecycle: this.#lifecycle,
      webhooks: this.#webhooks,
    };
  }

  async jobs(actor: Actor, logger: Logger): Promise<JobInfo[]> {
    assertMay(actor, { kind: "area", area: "maintenance" });
    const runs = await this.#db.selectFrom("job_runs").selectAll().execute();
    return scheduledJobs(this.#deps(logger)).map((job) => {
      const run = runs.find((r) => r.name === job.name);
      return {
        name: job.name,
        periodSeconds: job.periodSeconds,
        lastRun: run
          ? {
              startedAt: Number(run.started_at),
              finishedAt: run.finished_at === null ? null : Number(run.finished_at),
              result: run.result,
            }
          : null,
      };
    });
  }

  /** Runs one job now; a dry run (the inactive-user removal only) writes nothing and lists who would go. */
  async run(actor: Actor, name: string, options: { dryRun?: boolean; logger: Logger }): Promise<JobOutcome> {
    assertMay(actor, { kind: "area", area: "maintenance" });
    const deps = this.#deps(options.logger);
    const jobs = scheduledJobs(deps);
    if (!jobs.some((job) => job.name === name))
      throw jobUnknown({ name: name.slice(0, 64), known: jobs.map((job) => job.name).join(", ") });
    const report: JobOutcome["report"] = [];
    let result: string;
    if (options.dryRun) {
      if (name !== dryRunJob) throw jobWithoutDryRun({ name });
      result = await removeInactiveUsers(deps, {
        dryRun: true,
        report: (email, verdict) => report.push({ email, verdict }),
      });
    } else {
      result = await new Scheduler(this.#db, options.logger, jobs).runNow(name);
    }
    // A job is many transactions of its own (each deletion, each batch), not one change: its entry,
    // which names the job's result, is written once the job has run.
    await this.#db
      .transaction()
      .execute((trx) =>
        this.#audit.record(
          actor,
          { action: "job.run", target: name, detail: { dryRun: options.dryRun === true, result } },
          trx,
        ),
      );
    return { name, dryRun: options.dryRun === true, result, report };
  }
}
