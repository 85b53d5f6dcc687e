import { Command, CommanderError } from "commander";
import { isDatabaseUnavailable } from "../db/unavailable.ts";
import { ServiceError } from "../errors.ts";
import { translator } from "../i18n/catalogue.ts";
import { refusalText } from "../i18n/refusal-text.ts";
import { nodeVersion, serviceVersion } from "../version.ts";
import { aliasCommands } from "./aliases.ts";
import { UsageError, withServices } from "./context.ts";
import { domainCommands } from "./domains.ts";
import { jobCommands } from "./jobs.ts";
import { mailCommands } from "./mail.ts";
import { metricsCommands } from "./metrics.ts";
import { movingCommands } from "./moving.ts";
import { openPgpCommands } from "./openpgp.ts";
import { provisioningCommands } from "./provisioning.ts";
import { settingCommands } from "./settings.ts";
import { setupCommands } from "./setup.ts";
import { tokenCommands } from "./tokens.ts";
import { userCommands } from "./users.ts";
import { webhookCommands } from "./webhooks.ts";

/**
 * The operator console. Command names are the reference's (`app:users:delete`, `app:alias:delete`,
 * ...); options name a user `-u, --user`, an alias `-a, --alias`, a domain `-d, --domain` in every
 * command, and lists take `--search` and `--json`. One file per command group, each a thin shell
 * over the services.
 */
const program = new Command("bin/console")
  .description("operator console of the mail account service")
  .version(`mail-account-service ${serviceVersion} (Node.js ${nodeVersion})`, "-V, --version")
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
domainCommands(program);
userCommands(program);
aliasCommands(program);
settingCommands(program);
setupCommands(program);
openPgpCommands(program);
webhookCommands(program);
jobCommands(program);
mailCommands(program);
metricsCommands(program);
movingCommands(program);
provisioningCommands(program);

// A reader that stops early (`| head`) closes the pipe: the rest of the output is not wanted, which
// is no error and no reason for a stack trace.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) process.exit(error.exitCode);
  process.stderr.write(`error: ${failureLine(error)}\n`);
  process.exit(1);
}

/** One line for what stopped a command: a usage mistake in its words, a service's refusal in English. */
function failureLine(error: unknown): string {
  if (error instanceof UsageError) return error.words;
  if (error instanceof ServiceError) {
    const { key, params } = refusalText(error);
    // A page shows the text beside its field; a console line names the setting or field itself.
    const subject = params.setting ?? params.field;
    const text = translator("en")(key, params);
    return subject === undefined ? text : `${subject}: ${text}`;
  }
  if (isDatabaseUnavailable(error)) return translator("en")("error.unavailable");
  return String(error);
}
