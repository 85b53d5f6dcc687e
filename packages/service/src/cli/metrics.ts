import type { Command } from "commander";
import { accountFigures, accountFiguresText } from "../metrics/metrics.ts";
import { withServices } from "./context.ts";

export function metricsCommands(program: Command): void {
  program
    .command("app:metrics")
    .description(
      "print the account figures in Prometheus text format (for the node-exporter textfile collector)",
    )
    .action(async () => {
      process.stdout.write(accountFiguresText(await withServices((s) => accountFigures(s.database.db))));
    });
}
