import type { Command } from "commander";
import { consoleActor } from "../accounts/admin-scope.ts";
import { collect, out, UsageError, withServices } from "./context.ts";

/** Webhook endpoints: create, list, delete. */
export function webhookCommands(program: Command): void {
  program
    .command("app:webhook:create")
    .description("add a webhook endpoint; prints its secret once")
    .requiredOption("--url <url>", "where deliveries are POSTed")
    .requiredOption(
      "--events <events>",
      "comma-separated: user.created, user.deleted, user.reset; may be repeated",
      collect,
    )
    .option("--secret <secret>", "shared secret (default: a random one)")
    .option("-d, --domain <name>", "only events of users of this domain; may be repeated", collect, [])
    .action(async (options: { url: string; events: string[]; secret?: string; domain: string[] }) => {
      const result = await withServices((s) =>
        s.admin.webhooks.create(consoleActor, {
          url: options.url,
          events: options.events
            .flatMap((e) => e.split(","))
            .map((e) => e.trim())
            .filter(Boolean),
          secret: options.secret,
          domains: options.domain,
        }),
      );
      out(`Created webhook ${result.endpoint.id} for ${result.endpoint.url}`);
      out(`Secret: ${result.secret}`);
    });

  program
    .command("app:webhook:list")
    .description("list webhook endpoints (never their secrets)")
    .action(async () => {
      const endpoints = await withServices((s) => s.webhooks.list());
      for (const e of endpoints) {
        out(
          `${e.id}\t${e.url}\t${e.events.join(",")}\t${e.domains.join(",") || "all domains"}\t${e.enabled ? "enabled" : "disabled"}`,
        );
      }
      if (endpoints.length === 0) out("No webhooks.");
    });

  program
    .command("app:webhook:delete")
    .description("remove a webhook endpoint and its delivery log")
    .requiredOption("--id <id>", "endpoint id from app:webhook:list")
    .action(async (options: { id: string }) => {
      if (!/^\d+$/.test(options.id)) throw new UsageError("--id: must be a number");
      await withServices((s) => s.admin.webhooks.delete(consoleActor, Number(options.id)));
      out(`Deleted webhook ${options.id}`);
    });
}
