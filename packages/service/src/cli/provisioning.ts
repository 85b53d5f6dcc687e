import { closeSync, openSync, readFileSync, writeSync } from "node:fs";
import type { Command } from "commander";
import { consoleActor } from "../accounts/admin-scope.ts";
import type { CreateAliasInput } from "../accounts/aliases.ts";
import type { CreateUserInput } from "../accounts/users.ts";
import {
  checkProvisioning,
  credentialsHeader,
  credentialsLine,
  exportUsersCsv,
  formatProblems,
  inputsFromCsv,
  provisionUsers,
} from "../import/bulk-users.ts";
import { out, UsageError, withServices } from "./context.ts";

/** Bulk provisioning: many users from a CSV list, and the users as such a list. */
export function provisioningCommands(program: Command): void {
  program
    .command("app:users:import")
    .description(
      "create the users of a CSV list (columns email,password,quota,mailCrypt,aliases); the whole list is checked first, and nothing is created while any line is bad",
    )
    .requiredOption("--csv <file>", "the list; its first line names the columns (email required)")
    .option(
      "--output <file>",
      "new file for the passwords made here (empty password column) and the recovery tokens, to hand to the users; required unless --dry-run",
    )
    .option("--dry-run", "only check the list")
    .action(async (options: { csv: string; output?: string; dryRun?: boolean }) => {
      if (!options.dryRun && !options.output)
        throw new UsageError(
          "--output <file> is required: the passwords made here and the recovery tokens are written there",
        );
      let text: string;
      try {
        text = readFileSync(options.csv, "utf8");
      } catch (error) {
        throw new UsageError(
          `--csv: cannot read ${options.csv}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
        );
      }
      const parsed = inputsFromCsv(text);
      await withServices(async (s) => {
        const checked =
          parsed.problems.length > 0 && parsed.inputs.length === 0
            ? { lines: [], problems: [] }
            : await checkProvisioning(s.database.db, parsed.inputs);
        const problems = [...parsed.problems, ...checked.problems].sort((a, b) => a.line - b.line);
        if (problems.length > 0) {
          for (const line of formatProblems(problems)) process.stderr.write(`${line}\n`);
          throw new UsageError(
            `${problems.length} of ${parsed.inputs.length} lines cannot be imported; nothing was created`,
          );
        }
        if (options.dryRun)
          return out(`${checked.lines.length} users can be imported (dry run, nothing written).`);
        // The file holds secrets: made new (never over another file), readable by its owner only.
        let fd: number;
        try {
          fd = openSync(options.output as string, "wx", 0o600);
        } catch (error) {
          throw new UsageError(
            `--output: cannot create ${options.output}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
          );
        }
        try {
          writeSync(fd, `${credentialsHeader}\r\n`);
          // As app:user:create and app:alias:create do it: the console's reach, the audit log.
          const actions = {
            createUser: (input: CreateUserInput) => s.admin.users.create(consoleActor, input),
            createAlias: (input: CreateAliasInput) => s.admin.aliases.create(consoleActor, input),
          };
          const result = await provisionUsers(actions, checked.lines, (user) => {
            writeSync(fd, `${credentialsLine(user)}\r\n`);
          });
          for (const line of formatProblems(result.failed)) process.stderr.write(`${line}\n`);
          const aliases = result.created.reduce((n, u) => n + u.aliases.length, 0);
          out(
            `Created ${result.created.length} users and ${aliases} aliases; credentials in ${options.output}.`,
          );
          if (result.failed.length > 0) process.exitCode = 2;
        } finally {
          closeSync(fd);
        }
      });
    });

  program
    .command("app:users:export")
    .description(
      "print the active users as a CSV list (email,quota,mailCrypt,aliases) that app:users:import takes; no secrets",
    )
    .option("--csv", "CSV (the only format, and the default)")
    .option("-d, --domain <name>", "only users of this domain")
    .action(async (options: { csv?: boolean; domain?: string }) => {
      await withServices(async (s) => {
        for await (const line of exportUsersCsv(s.database.db, { domain: options.domain }))
          if (!process.stdout.write(`${line}\r\n`))
            await new Promise((resolve) => process.stdout.once("drain", resolve));
      });
    });
}
