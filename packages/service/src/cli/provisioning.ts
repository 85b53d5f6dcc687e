import { closeSync, openSync, readFileSync, writeSync } from "node:fs";
import type { Command } from "commander";
import { consoleActor } from "../accounts/admin-scope.ts";
import {
  credentialsHeader,
  credentialsLine,
  exportUsersCsv,
  formatProblems,
  importUsers,
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
      await withServices(async (s) => {
        let fd: number | undefined;
        try {
          // As app:user:create and app:alias:create do it: the console's reach, the audit log.
          const result = await importUsers(
            { db: s.database.db, admin: s.admin, passwordPolicy: s.passwordPolicy },
            consoleActor,
            { csv: text },
            {
              dryRun: options.dryRun === true,
              // The file holds secrets: made new (never over another file), readable by its owner only.
              beforeCreating: () => {
                try {
                  fd = openSync(options.output as string, "wx", 0o600);
                } catch (error) {
                  throw new UsageError(
                    `--output: cannot create ${options.output}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
                  );
                }
                writeSync(fd, `${credentialsHeader}\r\n`);
              },
              onCreated: (user) => {
                writeSync(fd as number, `${credentialsLine(user)}\r\n`);
              },
            },
          );
          if (result.outcome === "refused") {
            for (const line of formatProblems(result.lines)) process.stderr.write(`${line}\n`);
            throw new UsageError(result.summary);
          }
          if (options.dryRun)
            return out(`${result.checked} users can be imported (dry run, nothing written).`);
          for (const line of formatProblems(result.failed)) process.stderr.write(`${line}\n`);
          const aliases = result.created.reduce((n, u) => n + u.aliases.length, 0);
          out(
            `Created ${result.created.length} users and ${aliases} aliases; credentials in ${options.output}.`,
          );
          if (result.failed.length > 0) process.exitCode = 2;
        } finally {
          if (fd !== undefined) closeSync(fd);
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
