import type { Kysely, Transaction } from "kysely";
import { decodeSetting } from "../accounts/settings.ts";
import type { Database, DeliveryStatus } from "../db/schema.ts";
import { ulid } from "../db/ulid.ts";
import type { Locale } from "../i18n/catalogue.ts";
import {
  aliasCreatedMessage,
  guessingMessage,
  type MailMessage,
  type MailSettings,
  recoveryStartedMessage,
  welcomeMessage,
} from "./messages.ts";

export interface MailOutboxOptions {
  /**
   * Whether e-mail is sent at all (SMTP_URL set). Without a relay nothing is written: a row that
   * no worker will ever send would only pile up, and go out surprisingly late (a welcome months
   * after registration, a recovery warning after the recovery) once a relay is configured.
   */
  enabled: boolean;
  clock?: () => number;
}

/**
 * The durable e-mail outbox. A message is written in the transaction of the change that causes it,
 * so it exists exactly when the change does (none lost, none for a change that rolled back); the
 * mail worker (sender.ts) sends it later and retries while the relay is down.
 *
 *     await services.mail.welcome(trx, { email, locale });
 *     await services.mail.enqueue(trx, someMessage);
 */
export class MailOutbox {
  readonly enabled: boolean;
  readonly #clock: () => number;

  constructor(options: MailOutboxOptions) {
    this.enabled = options.enabled;
    this.#clock = options.clock ?? Date.now;
  }

  /** Writes the message for sending; returns its id, or null when e-mail is off. */
  async enqueue(trx: Transaction<Database>, message: MailMessage): Promise<string | null> {
    if (!this.enabled) return null;
    const now = this.#clock();
    const seconds = Math.floor(now / 1000);
    const id = ulid(now);
    await trx
      .insertInto("mail_outbox")
      .values({
        id,
        recipient: message.recipient,
        subject: message.subject,
        body: message.body,
        status: "pending",
        attempts: 0,
        next_attempt_at: seconds,
        claimed_until: null,
        claim_token: null,
        error: null,
        created_at: seconds,
        sent_at: null,
      })
      .execute();
    return id;
  }

  /** The welcome message to a new account, in its owner's language. */
  async welcome(
    trx: Transaction<Database>,
    input: { email: string; locale: Locale },
  ): Promise<string | null> {
    if (!this.enabled) return null;
    return this.enqueue(trx, welcomeMessage({ ...input, settings: await mailSettings(trx) }));
  }

  /** "New alias address created" to the alias owner. */
  async aliasCreated(
    trx: Transaction<Database>,
    input: { email: string; alias: string; locale: Locale },
  ): Promise<string | null> {
    if (!this.enabled) return null;
    return this.enqueue(trx, aliasCreatedMessage({ ...input, settings: await mailSettings(trx) }));
  }

  /** "Recovery started" to the account itself; `activeFrom` is when the new password can be set. */
  async recoveryStarted(
    trx: Transaction<Database>,
    input: { email: string; activeFrom: number; locale: Locale },
  ): Promise<string | null> {
    if (!this.enabled) return null;
    return this.enqueue(trx, recoveryStartedMessage({ ...input, settings: await mailSettings(trx) }));
  }

  /** "Someone is guessing your password" to the account (once per window of the guard's ceiling). */
  async guessing(
    trx: Transaction<Database>,
    input: { email: string; failures: number; clients: string[]; locale: Locale },
  ): Promise<string | null> {
    if (!this.enabled) return null;
    return this.enqueue(trx, guessingMessage({ ...input, settings: await mailSettings(trx) }));
  }
}

/**
 * The settings messages are built from, read through the caller's transaction (on SQLite a read
 * outside it would wait for the transaction's own connection).
 */
export async function mailSettings(db: Kysely<Database> | Transaction<Database>): Promise<MailSettings> {
  const rows = await db
    .selectFrom("settings")
    .select(["name", "value"])
    .where("name", "in", ["app_name", "app_url", "project_name"])
    .execute();
  const stored = new Map(rows.map((row) => [row.name, row.value]));
  return {
    appName: decodeSetting("app_name", stored.get("app_name")),
    appUrl: decodeSetting("app_url", stored.get("app_url")),
    projectName: decodeSetting("project_name", stored.get("project_name")),
  };
}

/** One outbox row as the console lists it: never the body. */
export interface OutboxEntry {
  id: string;
  recipient: string;
  subject: string;
  status: DeliveryStatus;
  attempts: number;
  createdAt: number;
  nextAttemptAt: number | null;
  sentAt: number | null;
  error: string | null;
}

/** The newest messages first, optionally of one status. */
export async function listOutbox(
  db: Kysely<Database>,
  filter: { status?: DeliveryStatus; limit: number },
): Promise<OutboxEntry[]> {
  let query = db
    .selectFrom("mail_outbox")
    .select([
      "id",
      "recipient",
      "subject",
      "status",
      "attempts",
      "created_at",
      "next_attempt_at",
      "sent_at",
      "error",
    ])
    .orderBy("id", "desc")
    .limit(filter.limit);
  if (filter.status) query = query.where("status", "=", filter.status);
  const rows = await query.execute();
  return rows.map((row) => ({
    id: row.id,
    recipient: row.recipient,
    subject: row.subject,
    status: row.status,
    attempts: row.attempts,
    createdAt: row.created_at,
    nextAttemptAt: row.next_attempt_at,
    sentAt: row.sent_at,
    error: row.error,
  }));
}

/**
 * Failed messages (these, or all) become due again with a fresh round of retries, e.g. after the
 * relay's credentials were fixed. Returns how many; messages not failed are left alone.
 */
export async function retryFailedMail(
  db: Kysely<Database>,
  ids: readonly string[] | "all",
  now = Math.floor(Date.now() / 1000),
): Promise<number> {
  if (ids !== "all" && ids.length === 0) return 0;
  let query = db
    .updateTable("mail_outbox")
    .set({ status: "pending", attempts: 0, next_attempt_at: now, claimed_until: null, claim_token: null })
    .where("status", "=", "failed");
  if (ids !== "all") query = query.where("id", "in", [...ids]);
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}
