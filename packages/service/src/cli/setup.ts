import type { Command } from "commander";
import { out, UsageError, withServices } from "./context.ts";

/** The first-run setup: the set-up code /init asks for. */
export function setupCommands(program: Command): void {
  program
    .command("app:setup:code")
    .description("print the set-up code /init asks for (only while no administrator exists)")
    .action(async () => {
      const code = await withServices((s) => s.setup.openSetupCode());
      if (code === null)
        throw new UsageError("an administrator exists: the set-up is done, no set-up code is needed");
      out(code);
    });
}
