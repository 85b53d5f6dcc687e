import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { MailCryptLevel } from "../accounts/mail-crypt.ts";
import { createBackground } from "../background.ts";
import { invalid, notFound } from "../errors.ts";
import { createLogger } from "../logger.ts";
import { accountFigures, accountFiguresText } from "../metrics/metrics.ts";
import { collect, readSecretFromStdin, withServices } from "./context.ts";

const out = (line: string) => process.stdout.write(`${line}\n`);

/** Console commands over the lifecycle, OpenPGP, webhook, metrics and job services (reference section 6 names). */
export function lifecycleCommands(program: Command) {
  program
    .command("app:users:delete")
    .description("delete a user (aliases, keys and second factor go with it; the address stays taken)")
    .requiredOption("-u, --user <email>", "the user")
    .option("--dry-run", "only say what would happen")
    .action(async (options: { user: string; dryRun?: boolean }) => {
      await withServices(async (s) => {
        const user = await s.users.getActive(options.user);
        if (options.dryRun) return out(`Would delete user ${user.email}`);
        await s.lifecycle.delete(user.email);
        out(`Deleted user ${user.email}`);
      });
    });

  for (const [name, verb] of [
    ["app:users:reset", "reset"],
    ["app:users:restore", "restore"],
  ] as const) {
    program
      .command(name)
      .description(
        verb === "reset"
          ? "give an active user a new password; new MailCrypt keys clear the mailbox (password read from stdin when not given)"
          : "make a deleted user active again with a new password (read from stdin when not given)",
      )
      .requiredOption("-u, --user <email>", "the user")
      .option("--password <password>", "the new password (at least 12 characters)")
      .option("--dry-run", "only say what would happen")
      .action(async (options: { user: string; password?: string; dryRun?: boolean }) => {
        await withServices(async (s) => {
          const user = await s.users.get(options.user);
          if (verb === "reset" && user.deleted)
            throw invalid(`user ${user.email} is deleted; restore it instead`);
          if (verb === "restore" && !user.deleted)
            throw invalid(`user ${user.email} is still active; reset it instead`);
          if (options.dryRun) return out(`Would ${verb} user ${user.email}`);
          const password = options.password ?? (await readSecretFromStdin("New password"));
          const result = await s.lifecycle[verb](user.email, password);
          out(`${verb === "reset" ? "Reset" : "Restored"} user ${user.email}`);
          if (result.recoveryToken)
            out(`New recovery token (please hand over to user): ${result.recoveryToken}`);
        });
      });
  }

  program
    .command("app:user:password")
    .description(
      "change a password knowing the old one; the MailCrypt key is re-sealed (reads old and new password from stdin, one per line, when not given)",
    )
    .requiredOption("-u, --user <email>", "the user")
    .option("--old-password <password>", "the current password")
    .option("--password <password>", "the new password")
    .action(async (options: { user: string; oldPassword?: string; password?: string }) => {
      let { oldPassword, password } = options;
      if (oldPassword === undefined || password === undefined) {
        const lines = (await readSecretFromStdin("Old and new password, one per line", 2)).split("\n");
        oldPassword ??= lines[0] ?? "";
        password ??= lines[1] ?? "";
      }
      await withServices((s) => s.lifecycle.changePassword(options.user, oldPassword ?? "", password));
      out("Password changed.");
    });

  program
    .command("app:users:mailcrypt")
    .description("print a user's MailCrypt public key; with the password also the private key")
    .requiredOption("-u, --user <email>", "the user")
    .argument("[password]", "the user's password")
    .action(async (password: string | undefined, options: { user: string }) => {
      await withServices(async (s) => {
        if ((await s.settings.get("mail_crypt")) === MailCryptLevel.off)
          throw invalid("MailCrypt is off (setting mail_crypt = 0)");
        const user = await s.users.getActive(options.user);
        if (!user.mailCrypt || !user.mailCryptPublicKey || !user.mailCryptSecretBox) {
          throw invalid(`user ${user.email} has no MailCrypt keys`);
        }
        if (password === undefined) return out(user.mailCryptPublicKey);
        const result = await s.signIn.signIn(user.email, password, { unlockMailCrypt: true });
        if (result.kind !== "ok" || result.mailCrypt.state !== "unlocked")
          throw invalid("authentication failed");
        out(result.mailCrypt.privateKey);
        out(result.mailCrypt.publicKey);
      });
    });

  program
    .command("app:users:quota")
    .description("print a user's mailbox quota in MiB (nothing when unset)")
    .requiredOption("-u, --user <email>", "the user")
    .action(async (options: { user: string }) => {
      const user = await withServices((s) => s.users.getActive(options.user));
      if (user.quota !== null) out(String(user.quota));
    });

  program
    .command("app:alias:delete")
    .description("delete an alias (the address stays taken)")
    .requiredOption("-a, --alias <source>", "the alias address")
    .option("-u, --user <email>", "only if it belongs to this user")
    .option("--dry-run", "only say what would happen")
    .action(async (options: { alias: string; user?: string; dryRun?: boolean }) => {
      await withServices(async (s) => {
        const alias = await s.aliases.get(options.alias);
        if (alias.deleted) throw notFound(`Alias with address '${options.alias}' not found!`);
        if (options.user && alias.owner !== options.user.toLowerCase()) {
          throw invalid(`alias ${alias.source} does not belong to ${options.user}`);
        }
        if (options.dryRun) return out(`Would delete alias ${alias.source}`);
        await s.lifecycle.deleteAlias(alias.source);
        out(`Deleted alias ${alias.source}`);
      });
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
        await s.domains.delete(domain.name, s.lifecycle, options.force ?? false);
        out(`Deleted domain ${domain.name}`);
      });
    });

  program
    .command("app:openpgp:import-key")
    .description("publish an OpenPGP key (armored or binary file) for an address through WKD")
    .argument("<email>", "the address")
    .argument("<file>", "key file")
    .action(async (email: string, file: string) => {
      const data = await readFile(file).catch(() => {
        throw invalid(`cannot read ${file}`);
      });
      const info = await withServices((s) => s.openPgpKeys.import(email, new Uint8Array(data)));
      out(`Imported OpenPGP key for email ${info.email}: ${info.fingerprint}`);
    });

  program
    .command("app:openpgp:show-key")
    .argument("<email>", "the address")
    .description("show the published key of an address")
    .action(async (email: string) => {
      const info = await withServices((s) => s.openPgpKeys.get(email)).catch(() => null);
      out(
        info
          ? `OpenPGP key for email ${info.email}: ${info.fingerprint}`
          : `No OpenPGP key found for email ${email}`,
      );
    });

  program
    .command("app:openpgp:delete-key")
    .argument("<email>", "the address")
    .description("stop publishing the key of an address")
    .action(async (email: string) => {
      const info = await withServices((s) => s.openPgpKeys.delete(email)).catch(() => null);
      out(
        info
          ? `Deleted OpenPGP key for email ${info.email}: ${info.fingerprint}`
          : `No OpenPGP key found for email ${email}`,
      );
    });

  program
    .command("app:metrics")
    .description(
      "print the account figures in Prometheus text format (for the node-exporter textfile collector)",
    )
    .action(async () => {
      process.stdout.write(accountFiguresText(await withServices((s) => accountFigures(s.database.db))));
    });

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
    .option("--domain <name>", "only events of users of this domain; may be repeated", collect, [])
    .action(async (options: { url: string; events: string[]; secret?: string; domain: string[] }) => {
      const result = await withServices((s) =>
        s.webhooks.create({
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
      if (!/^\d+$/.test(options.id)) throw invalid("--id: must be a number");
      await withServices((s) => s.webhooks.delete(Number(options.id)));
      out(`Deleted webhook ${options.id}`);
    });

  program
    .command("app:jobs:run")
    .description("run one scheduled job now: remove-inactive-users or prune-webhook-deliveries")
    .argument("<name>", "job name")
    .action(async (name: string) => {
      const result = await withServices(async (s) => {
        const background = createBackground(s, createLogger("silent"));
        if (!background.scheduler.jobNames.includes(name)) {
          throw invalid(`unknown job ${name} (known: ${background.scheduler.jobNames.join(", ")})`);
        }
        return background.scheduler.runNow(name);
      });
      out(`${name}: ${result}`);
    });
}
