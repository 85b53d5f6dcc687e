import type { Command } from "commander";
import { consoleActor } from "../accounts/admin-scope.ts";
import { hashToken } from "../tokens/tokens.ts";
import { collect, UsageError, withServices } from "./context.ts";

/** API tokens: create (printed once), list (never their values), delete. */
export function tokenCommands(program: Command) {
  program
    .command("app:api-token:create")
    .description("create an API token and print it once")
    .requiredOption("-t, --name <text>", "what the token is for")
    .requiredOption("-s, --scopes <scopes>", "comma-separated scopes; the option may be repeated", collect)
    .action(async (options: { name: string; scopes: string[] }) => {
      const scopes = options.scopes.flatMap((s) => s.split(","));
      const created = await withServices((s) => s.admin.tokens.create(consoleActor, options.name, scopes));
      process.stdout.write("Store this token securely - it cannot be retrieved again.\n");
      process.stdout.write(`Token: ${created.plainToken}\n`);
    });

  program
    .command("app:api-token:list")
    .description("list API tokens (never their values)")
    .action(async () => {
      const tokens = await withServices((s) => s.tokens.list());
      for (const t of tokens) {
        const lastUsed = t.lastUsedAt === null ? "never" : new Date(t.lastUsedAt * 1000).toISOString();
        process.stdout.write(`${t.id}\t${t.name}\t${t.scopes.join(",")}\tlast used: ${lastUsed}\n`);
      }
      if (tokens.length === 0) process.stdout.write("No API tokens.\n");
    });

  program
    .command("app:api-token:delete")
    .description("delete an API token, by id or by its plain value")
    .option("--id <id>", "token id from app:api-token:list")
    .option("-t, --token <plain>", "the plain token")
    .action(async (options: { id?: string; token?: string }) => {
      await withServices(async (s) => {
        let id = options.id !== undefined && /^\d+$/.test(options.id) ? Number(options.id) : null;
        if (options.token !== undefined) {
          const hash = hashToken(options.token.trim().toLowerCase());
          const row = await s.database.db
            .selectFrom("api_tokens")
            .select("id")
            .where("token_hash", "=", hash)
            .executeTakeFirst();
          id = row?.id ?? -1;
        }
        if (id === null) throw new UsageError("give --id <id> or --token <plain token>");
        await s.admin.tokens.delete(consoleActor, id);
      });
      process.stdout.write("API token deleted successfully.\n");
    });
}
