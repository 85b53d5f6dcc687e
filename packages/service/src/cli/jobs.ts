import type { Command } from "commander";
import { consoleActor } from "../accounts/admin-scope.ts";
import { createLogger } from "../logger.ts";
import { out, withServices } from "./context.ts";

export function jobCommands(program: Command): void {
  program
    .command("app:jobs:run")
    .description(
      "run one scheduled job now: remove-inactive-users, prune-sign-in-state or prune-webhook-deliveries",
    )
    .argument("<name>", "job name")
    .option("--dry-run", "remove-inactive-users only: list who would be removed and who is exempt")
    .action(async (name: string, options: { dryRun?: boolean }) => {
      // Through the admin services: the run is checked and written to the audit log (actor `console`).
      const outcome = await withServices((s) =>
        s.admin.maintenance.run(consoleActor, name, {
          dryRun: options.dryRun === true,
          logger: createLogger("silent"),
        }),
      );
      for (const { email, verdict } of outcome.report)
        out(verdict === "remove" ? `would remove ${email}` : `exempt ${email} (role keeps it)`);
      const result = outcome.result;
      out(`${name}: ${result}`);
    });
}
