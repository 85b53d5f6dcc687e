import type { Command } from "commander";
import { consoleActor } from "../accounts/admin-scope.ts";
import { MailCryptLevel } from "../accounts/mail-crypt-policy.ts";
import { ownerOrigin } from "../accounts/security-events.ts";
import type { UserStatus } from "../accounts/users.ts";
import {
  collect,
  confirmedPassword,
  dateTime,
  formerSpelling,
  type ListOptions,
  listAll,
  out,
  printJson,
  printTable,
  promptHidden,
  readNewPassword,
  readSecretsFromStdin,
  requiredValue,
  UsageError,
  withServices,
} from "./context.ts";

const statuses: readonly UserStatus[] = ["active", "deleted", "all"];

/** Users: create, list, delete, reset, restore, password, MailCrypt keys, quota (reference section 6 names). */
export function userCommands(program: Command): void {
  program
    .command("app:user:create")
    .description("create a user (the password is asked twice on a terminal, else read from standard input)")
    .option("-u, --user <email>", "address of the new user")
    .addOption(formerSpelling("--email <email>", "--user"))
    .option("--password <password>", "initial password (at least 12 characters)")
    .option("--role <role>", "role, e.g. ROLE_ADMIN; may be repeated", collect, [])
    .option("--mail-crypt", "switch MailCrypt on for this user (default: per the mail_crypt setting)")
    .option("--quota <MiB>", "mailbox quota in MiB")
    .option("--password-change-required", "the user must change the password before signing in")
    .action(
      async (options: {
        user?: string;
        email?: string;
        password?: string;
        role: string[];
        mailCrypt?: boolean;
        quota?: string;
        passwordChangeRequired?: boolean;
      }) => {
        const email = requiredValue("-u, --user <email>", options.user, options.email);
        if (options.quota !== undefined && !/^\d+$/.test(options.quota))
          throw new UsageError("--quota: must be a whole number of MiB");
        const password = options.password ?? (await readNewPassword("Password"));
        const created = await withServices((s) =>
          s.admin.users.create(consoleActor, {
            email,
            password,
            roles: options.role,
            mailCrypt: options.mailCrypt ? true : undefined,
            quota: options.quota === undefined ? null : Number(options.quota),
            passwordChangeRequired: options.passwordChangeRequired ?? false,
          }),
        );
        out(`Created user ${created.user.email}`);
        if (created.recoveryToken) {
          out(`Recovery token (hand it to the user; shown once): ${created.recoveryToken}`);
        }
      },
    );

  program
    .command("app:users:list")
    .description("list users, active ones unless --status says otherwise")
    .option("-d, --domain <name>", "only users of this domain")
    .option("--search <text>", "only addresses containing this text")
    .option("--status <status>", `one of ${statuses.join(", ")}`, "active")
    .option("--json", "print JSON (the admin API's fields) instead of a table")
    .action(async (options: ListOptions & { domain?: string; status: string }) => {
      const status = options.status as UserStatus;
      if (!statuses.includes(status)) throw new UsageError(`--status: must be one of ${statuses.join(", ")}`);
      const users = await withServices(async (s) => {
        if (options.domain !== undefined) await s.domains.get(options.domain);
        return listAll((page) => s.users.list(page, { domain: options.domain, status }), options.search);
      });
      if (options.json) return printJson(users);
      printTable(
        ["EMAIL", "STATUS", "ROLES", "QUOTA", "MAILCRYPT", "LAST LOGIN"],
        users.map((u) => [
          u.email,
          u.deleted ? "deleted" : "active",
          u.roles.filter((r) => r !== "ROLE_USER").join(",") || "-",
          u.quota === null ? "-" : `${u.quota} MiB`,
          u.mailCrypt ? "on" : "off",
          dateTime(u.lastLoginTime),
        ]),
        "No users.",
      );
    });

  program
    .command("app:users:delete")
    .description("delete a user (aliases, keys and second factor go with it; the address stays taken)")
    .requiredOption("-u, --user <email>", "the user")
    .option("--dry-run", "only say what would happen")
    .action(async (options: { user: string; dryRun?: boolean }) => {
      await withServices(async (s) => {
        const user = await s.users.getActive(options.user);
        if (options.dryRun) return out(`Would delete user ${user.email}`);
        await s.admin.users.delete(consoleActor, user.email);
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
          ? "give an active user a new password; new MailCrypt keys clear the mailbox (password asked twice on a terminal, else read from standard input)"
          : "make a deleted user active again with a new password (asked twice on a terminal, else read from standard input)",
      )
      .requiredOption("-u, --user <email>", "the user")
      .option("--password <password>", "the new password (at least 12 characters)")
      .option("--dry-run", "only say what would happen")
      .action(async (options: { user: string; password?: string; dryRun?: boolean }) => {
        await withServices(async (s) => {
          const user = await s.users.get(options.user);
          if (verb === "reset" && user.deleted)
            throw new UsageError(`user ${user.email} is deleted; restore it instead`);
          if (verb === "restore" && !user.deleted)
            throw new UsageError(`user ${user.email} is still active; reset it instead`);
          if (options.dryRun) return out(`Would ${verb} user ${user.email}`);
          const password = options.password ?? (await readNewPassword("New password"));
          const result = await s.admin.users[verb](consoleActor, user.email, password);
          out(`${verb === "reset" ? "Reset" : "Restored"} user ${user.email}`);
          if (result.recoveryToken)
            out(`New recovery token (please hand over to user): ${result.recoveryToken}`);
        });
      });
  }

  program
    .command("app:user:password")
    .description(
      "change a password knowing the old one; the MailCrypt key is re-sealed (on a terminal the old password is asked once and the new one twice; piped, old and new one per line)",
    )
    .requiredOption("-u, --user <email>", "the user")
    .option("--old-password <password>", "the current password")
    .option("--password <password>", "the new password")
    .action(async (options: { user: string; oldPassword?: string; password?: string }) => {
      let { oldPassword, password } = options;
      if (process.stdin.isTTY) {
        oldPassword ??= await promptHidden("Current password: ");
        password ??= confirmedPassword(
          await promptHidden("New password: "),
          await promptHidden("New password (again): "),
        );
      } else if (oldPassword === undefined || password === undefined) {
        const lines = await readSecretsFromStdin(2);
        oldPassword ??= lines[0] ?? "";
        password ??= lines[1] ?? "";
      }
      await withServices(async (s) => {
        const proof = await s.signIn.confirmPassword(
          await s.users.getActive(options.user),
          oldPassword ?? "",
        );
        await s.lifecycle.changePassword(proof, password ?? "", ownerOrigin("console"));
      });
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
          throw new UsageError("MailCrypt is off (setting mail_crypt = 0)");
        const user = await s.users.getActive(options.user);
        if (!user.mailCrypt || !user.mailCryptPublicKey || !user.mailCryptSecretBox) {
          throw new UsageError(`user ${user.email} has no MailCrypt keys`);
        }
        if (password === undefined) return out(user.mailCryptPublicKey);
        const result = await s.signIn.signIn(user.email, password, { unlockMailCrypt: true });
        if (result.kind !== "ok" || result.mailCrypt.state !== "unlocked")
          throw new UsageError("authentication failed");
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
}
