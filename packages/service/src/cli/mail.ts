import type { Command } from "commander";
import type { DeliveryStatus } from "../db/schema.ts";
import { listOutbox, retryFailedMail } from "../mail/outbox.ts";
import { dateTime, out, printJson, printTable, UsageError, withServices } from "./context.ts";

const statuses: readonly DeliveryStatus[] = ["pending", "success", "failed"];

/** The e-mail outbox: what was sent, what waits, what failed; failed messages sent again. Never a body. */
export function mailCommands(program: Command): void {
  program
    .command("app:mail:list")
    .description("list e-mails to users, newest first (recipient, subject, status; never the text)")
    .option("--status <status>", "pending, success or failed")
    .option("--limit <n>", "how many (default 50)", "50")
    .option("--json", "print JSON")
    .action(async (options: { status?: string; limit: string; json?: boolean }) => {
      const status = options.status as DeliveryStatus | undefined;
      if (status !== undefined && !statuses.includes(status))
        throw new UsageError("--status: must be pending, success or failed");
      if (!/^\d{1,6}$/.test(options.limit) || Number(options.limit) < 1)
        throw new UsageError("--limit: must be a whole number from 1");
      const entries = await withServices((s) =>
        listOutbox(s.database.db, { limit: Number(options.limit), ...(status ? { status } : {}) }),
      );
      if (options.json) return printJson(entries);
      printTable(
        ["ID", "STATUS", "ATTEMPTS", "CREATED", "SENT", "RECIPIENT", "SUBJECT / ERROR"],
        entries.map((e) => [
          e.id,
          e.status,
          String(e.attempts),
          dateTime(e.createdAt),
          e.sentAt === null ? "-" : dateTime(e.sentAt),
          e.recipient,
          e.status === "success" || !e.error ? e.subject : `${e.subject} (${e.error.slice(0, 120)})`,
        ]),
        "No e-mails.",
      );
    });

  program
    .command("app:mail:retry")
    .description("send failed e-mails again, with a fresh round of retries")
    .option("--id <id>", "one message id from app:mail:list; may be repeated", (v, p: string[] = []) => [
      ...p,
      v,
    ])
    .option("--all-failed", "every failed message")
    .action(async (options: { id?: string[]; allFailed?: boolean }) => {
      if (!options.allFailed && !options.id?.length) throw new UsageError("give --id <id> or --all-failed");
      if (options.allFailed && options.id?.length) throw new UsageError("give either --id or --all-failed");
      const ids = options.allFailed ? ("all" as const) : (options.id ?? []);
      const count = await withServices((s) => retryFailedMail(s.database.db, ids));
      out(`${count} e-mail(s) will be sent again.`);
    });
}
