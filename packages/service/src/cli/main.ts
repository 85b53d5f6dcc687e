import { Command, CommanderError } from "commander";
import { ConfigError } from "../config.ts";
import { ServiceError } from "../errors.ts";
import { accountCommands } from "./accounts.ts";
import { withServices } from "./context.ts";
import { lifecycleCommands } from "./lifecycle.ts";
import { tokenCommands } from "./tokens.ts";

const program = new Command("bin/console")
  .description("operator console of the mail account service")
  .showHelpAfterError()
  .exitOverride();

program
  .command("app:migrate")
  .description("apply pending database migrations")
  .action(async () => {
    await withServices(async () => {});
    process.stdout.write("Database schema is up to date.\n");
  });

tokenCommands(program);
accountCommands(program);
lifecycleCommands(program);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    process.exit(error.exitCode);
  }
  const message =
    error instanceof ServiceError || error instanceof ConfigError
      ? error.message
      : error instanceof Error
        ? error.message
        : String(error);
  process.stderr.write(`error: ${message}\n`);
  process.exit(1);
}
