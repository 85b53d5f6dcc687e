import type { Command } from "commander";
import { invalid } from "../errors.ts";
import { collect, readSecretFromStdin, withServices } from "./context.ts";

export function accountCommands(program: Command) {
  program
    .command("app:domain:create")
    .description("add a managed domain")
    .argument("<name>", "domain name")
    .action(async (name: string) => {
      const domain = await withServices((s) => s.domains.create(name));
      process.stdout.write(`Created domain ${domain.name}\n`);
    });

  program
    .command("app:user:create")
    .description("create a user (the password is read from standard input when --password is not given)")
    .requiredOption("--email <email>", "address of the new user")
    .option("--password <password>", "initial password (at least 12 characters)")
    .option("--role <role>", "role, e.g. ROLE_ADMIN; may be repeated", collect, [])
    .option("--mail-crypt", "switch MailCrypt on for this user (default: per the mail_crypt setting)")
    .option("--quota <MiB>", "mailbox quota in MiB")
    .option("--password-change-required", "the user must change the password before signing in")
    .action(
      async (options: {
        email: string;
        password?: string;
        role: string[];
        mailCrypt?: boolean;
        quota?: string;
        passwordChangeRequired?: boolean;
      }) => {
        const password = options.password ?? (await readSecretFromStdin("Password"));
        if (options.quota !== undefined && !/^\d+$/.test(options.quota))
          throw invalid("--quota: must be a whole number of MiB");
        const created = await withServices((s) =>
          s.users.create(
            {
              email: options.email,
              password,
              roles: options.role,
              mailCrypt: options.mailCrypt ? true : undefined,
              quota: options.quota === undefined ? null : Number(options.quota),
              passwordChangeRequired: options.passwordChangeRequired ?? false,
            },
            { announce: true },
          ),
        );
        process.stdout.write(`Created user ${created.user.email}\n`);
        if (created.recoveryToken) {
          process.stdout.write(
            `Recovery token (hand it to the user; shown once): ${created.recoveryToken}\n`,
          );
        }
      },
    );

  program
    .command("app:alias:create")
    .description("create an alias")
    .requiredOption("--source <address>", "the alias address")
    .option("--destination <address>", "destination; may be repeated", collect, [])
    .option("--owner <email>", "user who owns the alias (default destination)")
    .action(async (options: { source: string; destination: string[]; owner?: string }) => {
      const alias = await withServices((s) =>
        s.aliases.create({
          source: options.source,
          destinations: options.destination,
          owner: options.owner ?? null,
        }),
      );
      process.stdout.write(`Created alias ${alias.source} -> ${alias.destinations.join(", ")}\n`);
    });

  program
    .command("app:setting:set")
    .description("change a setting")
    .argument("<name>", "setting name (see app:setting:list)")
    .argument("<value>", "new value")
    .action(async (name: string, value: string) => {
      await withServices((s) => s.settings.update({ [name]: value }));
      process.stdout.write(`Setting ${name} updated\n`);
    });

  program
    .command("app:setting:list")
    .description("print every setting with its value")
    .action(async () => {
      const all = await withServices((s) => s.settings.all());
      for (const [name, value] of Object.entries(all))
        process.stdout.write(`${name}=${JSON.stringify(value)}\n`);
    });
}
