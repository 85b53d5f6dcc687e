import type { Command } from "commander";
import { createBackground } from "../background.ts";
import { invalid } from "../errors.ts";
import { removeInactiveUsers } from "../jobs/jobs.ts";
import { createLogger } from "../logger.ts";
import { out, withServices } from "./context.ts";

export function jobCommands(program: Command): void {
  program
    .command("app:jobs:run")
    .description("run one scheduled job now: remove-inactive-users, prune-sign-in-state or prune-webhook-deliveries")
    .argument("<name>", "job name")
    .option("--dry-run", "remove-inactive-users only: list who would be removed and who is exempt")
    .action(async (name: string, options: { dryRun?: boolean }) => {
      const result = await withServices(async (s) => {
        const logger = createLogger("silent");
        const background = createBackground(s, logger);
        if (!background.scheduler.jobNames.includes(name)) {
          throw invalid(`unknown job ${name} (known: ${background.scheduler.jobNames.join(", ")})`);
        }
        if (!options.dryRun) return background.scheduler.runNow(name);
        if (name !== "remove-inactive-users") throw invalid(`--dry-run: job ${name} has no dry run`);
        return removeInactiveUsers(
          { db: s.database.db, logger, settings: s.settings, lifecycle: s.lifecycle, webhooks: s.webhooks },
          {
            dryRun: true,
            report: (email, verdict) =>
              out(verdict === "remove" ? `would remove ${email}` : `exempt ${email} (role keeps it)`),
          },
        );
      });
      out(`${name}: ${result}`);
    });
}
