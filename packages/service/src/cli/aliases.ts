import type { Command } from "commander";
import { consoleActor } from "../accounts/admin-scope.ts";
import {
  collect,
  formerSpelling,
  type ListOptions,
  listAll,
  out,
  printJson,
  printTable,
  requiredValue,
  UsageError,
  withServices,
} from "./context.ts";

/** Aliases: create, list, delete. */
export function aliasCommands(program: Command): void {
  program
    .command("app:alias:create")
    .description("create an alias")
    .option("-a, --alias <address>", "the alias address")
    .addOption(formerSpelling("--source <address>", "--alias"))
    .option("--destination <address>", "destination; may be repeated", collect, [])
    .option("-u, --user <email>", "user who owns the alias (default destination)")
    .addOption(formerSpelling("--owner <email>", "--user"))
    .action(
      async (options: {
        alias?: string;
        source?: string;
        destination: string[];
        user?: string;
        owner?: string;
      }) => {
        const source = requiredValue("-a, --alias <address>", options.alias, options.source);
        const alias = await withServices((s) =>
          s.admin.aliases.create(consoleActor, {
            source,
            destinations: options.destination,
            owner: options.user ?? options.owner ?? null,
          }),
        );
        out(`Created alias ${alias.source} -> ${alias.destinations.join(", ")}`);
      },
    );

  program
    .command("app:aliases:list")
    .description("list aliases (deleted ones only with --status deleted or all)")
    .option("-d, --domain <name>", "only aliases of this domain")
    .option("-u, --user <email>", "only aliases owned by this user")
    .option("--search <text>", "only addresses containing this text")
    .option("--status <status>", "one of active, deleted, all", "active")
    .option("--json", "print JSON (the admin API's fields) instead of a table")
    .action(async (options: ListOptions & { domain?: string; user?: string; status: string }) => {
      if (!["active", "deleted", "all"].includes(options.status))
        throw new UsageError("--status: must be one of active, deleted, all");
      const aliases = (
        await withServices(async (s) => {
          if (options.domain !== undefined) await s.domains.get(options.domain);
          return listAll(
            (page) => s.aliases.list(page, { domain: options.domain, owner: options.user }),
            options.search,
          );
        })
      ).filter((a) => options.status === "all" || a.deleted === (options.status === "deleted"));
      if (options.json) return printJson(aliases);
      printTable(
        ["ALIAS", "DESTINATIONS", "OWNER", "STATUS"],
        aliases.map((a) => [
          a.source,
          a.destinations.join(",") || "-",
          a.owner ?? "-",
          a.deleted ? "deleted" : "active",
        ]),
        "No aliases.",
      );
    });

  program
    .command("app:alias:delete")
    .description("delete an alias (the address stays taken)")
    .requiredOption("-a, --alias <address>", "the alias address")
    .option("-u, --user <email>", "only if it belongs to this user")
    .option("--dry-run", "only say what would happen")
    .action(async (options: { alias: string; user?: string; dryRun?: boolean }) => {
      await withServices(async (s) => {
        const alias = await s.aliases.get(options.alias);
        if (alias.deleted) throw new UsageError(`Alias with address '${options.alias}' not found!`);
        if (options.user && alias.owner !== options.user.toLowerCase()) {
          throw new UsageError(`alias ${alias.source} does not belong to ${options.user}`);
        }
        if (options.dryRun) return out(`Would delete alias ${alias.source}`);
        await s.admin.aliases.delete(consoleActor, alias.source);
        out(`Deleted alias ${alias.source}`);
      });
    });
}
