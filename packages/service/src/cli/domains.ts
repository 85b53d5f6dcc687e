import type { Command } from "commander";
import { consoleActor } from "../accounts/admin-scope.ts";
import {
  dateTime,
  type ListOptions,
  listAll,
  out,
  printJson,
  printTable,
  UsageError,
  withServices,
} from "./context.ts";

/** Domains: create, list, delete. */
export function domainCommands(program: Command): void {
  program
    .command("app:domain:create")
    .description("add a managed domain")
    .argument("[name]", "domain name (or -d, --domain)")
    .option("-d, --domain <name>", "domain name")
    .action(async (argument: string | undefined, options: { domain?: string }) => {
      if (argument !== undefined && options.domain !== undefined && argument !== options.domain)
        throw new UsageError("give the domain once, as argument or as -d, --domain");
      const name = argument ?? options.domain;
      if (name === undefined) throw new UsageError("give the domain name, as argument or as -d, --domain");
      const domain = await withServices((s) => s.admin.domains.create(consoleActor, name));
      out(`Created domain ${domain.name}`);
    });

  program
    .command("app:domains:list")
    .description("list the managed domains")
    .option("--search <text>", "only names containing this text")
    .option("--json", "print JSON (the admin API's fields) instead of a table")
    .action(async (options: ListOptions) => {
      const domains = await withServices((s) => listAll((page) => s.domains.list(page), options.search));
      if (options.json) return printJson(domains);
      printTable(
        ["DOMAIN", "CREATED"],
        domains.map((d) => [d.name, dateTime(d.createdAt)]),
        "No domains.",
      );
    });

  program
    .command("app:domain:delete")
    .description("delete a domain; with --force its active users are deleted first (webhooks included)")
    .requiredOption("-d, --domain <name>", "the domain")
    .option("--force", "delete active users and aliases too")
    .option("--dry-run", "only count what would be deleted")
    .action(async (options: { domain: string; force?: boolean; dryRun?: boolean }) => {
      await withServices(async (s) => {
        const domain = await s.domains.get(options.domain);
        if (options.dryRun) {
          const contents = await s.domains.contents(domain.id);
          return out(
            `Would delete domain ${domain.name} with ${contents.activeUsers} active users and ${contents.activeAliases} active aliases`,
          );
        }
        await s.admin.domains.delete(consoleActor, domain.name, options.force ?? false);
        out(`Deleted domain ${domain.name}`);
      });
    });
}
