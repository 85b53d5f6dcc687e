import { randomUUID } from "node:crypto";
import type { Expression, ExpressionBuilder, Kysely, SqlBool } from "kysely";
import { createTransport } from "nodemailer";
import { decodeSetting } from "../accounts/settings.ts";
import type { Database } from "../db/schema.ts";
import type { Logger } from "../logger.ts";

export interface MailWorkerOptions {
  /** Seconds to wait after the 1st, 2nd, ... failed attempt; when exhausted the message fails. */
  retryDelays?: number[];
  /** Connection, greeting and socket timeout of one attempt. */
  timeoutMs?: number;
  pollIntervalMs?: number;
  concurrency?: number;
  clock?: () => number;
  onAttempt?: (outcome: MailAttemptOutcome) => void;
}

export interface MailAttemptOutcome {
  messageId: string;
  success: boolean;
  final: boolean;
  durationSeconds: number;
}

/**
 * About nine hours in all: a relay that is down for a restart, an upgrade or a night is waited out;
 * after that the message is marked failed (the console can retry it).
 */
export const defaultMailRetryDelays = [10, 60, 300, 1800, 3600, 7200, 21600];
const maxStoredText = 4096;
/** Sent messages are kept this long (to answer "was it sent?"), failed ones longer (to be retried by hand). */
export const keepSentSeconds = 14 * 86400;
export const keepFailedSeconds = 30 * 86400;
const pruneEverySeconds = 3600;

const dueAt =
  (now: number) =>
  (eb: ExpressionBuilder<Database, "mail_outbox">): Expression<SqlBool> =>
    eb.and([
      eb("status", "=", "pending"),
      eb("next_attempt_at", "<=", now),
      eb.or([eb("claimed_until", "is", null), eb("claimed_until", "<", now)]),
    ]);

/**
 * Sends due rows of the e-mail outbox through the SMTP relay (SMTP_URL), like the webhook worker:
 * a row is claimed with a conditional update that sets a lease, so several instances never send
 * one attempt twice and a worker that dies mid-attempt loses its lease. From is built at sending
 * (`email_sender_address` with the display name `app_name`), the Message-ID from the row's id, so
 * a relay that got a message but whose answer was lost sees the retry as the same message.
 * Only ids, attempt numbers and SMTP errors are logged, never a subject or body.
 */
export class MailWorker {
  readonly #db: Kysely<Database>;
  readonly #logger: Logger;
  readonly #transport: ReturnType<typeof createTransport>;
  readonly #retryDelays: number[];
  readonly #timeoutMs: number;
  readonly #pollIntervalMs: number;
  readonly #concurrency: number;
  readonly #clock: () => number;
  readonly #onAttempt: (outcome: MailAttemptOutcome) => void;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #stopped = false;
  #prunedAt = 0;

  constructor(db: Kysely<Database>, logger: Logger, smtpUrl: string, options: MailWorkerOptions = {}) {
    this.#db = db;
    this.#logger = logger;
    this.#retryDelays = options.retryDelays ?? defaultMailRetryDelays;
    this.#timeoutMs = options.timeoutMs ?? 30000;
    this.#pollIntervalMs = options.pollIntervalMs ?? 2000;
    this.#concurrency = options.concurrency ?? 4;
    this.#clock = options.clock ?? Date.now;
    this.#onAttempt = options.onAttempt ?? (() => {});
    // The URL's own options (user:password@, ?tls.rejectUnauthorized=false, ...) win over these
    // timeouts, which bound an attempt so a hanging relay cannot hold a lease for long.
    this.#transport = createTransport({
      url: smtpUrl,
      connectionTimeout: this.#timeoutMs,
      greetingTimeout: this.#timeoutMs,
      socketTimeout: this.#timeoutMs,
    });
  }

  start(): void {
    this.#schedule(0);
  }

  /** Stops polling and waits for the attempts under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
    this.#transport.close();
  }

  #schedule(delay: number) {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.runOnce()
        .then(() => undefined)
        .catch((error: unknown) => this.#logger.warn({ err: errorText(error) }, "mail worker pass failed"))
        .finally(() => this.#schedule(this.#pollIntervalMs));
    }, delay);
    this.#timer.unref();
  }

  /** One pass: claims and sends every due message (in batches). Returns how many were attempted. */
  async runOnce(): Promise<number> {
    if (this.#seconds() - this.#prunedAt >= pruneEverySeconds) await this.prune();
    let attempted = 0;
    for (;;) {
      const now = this.#seconds();
      const due = await this.#db
        .selectFrom("mail_outbox")
        .select("id")
        .where(dueAt(now))
        .orderBy("next_attempt_at")
        .limit(this.#concurrency)
        .execute();
      if (due.length === 0) return attempted;
      const from = await this.#sender();
      const results = await Promise.all(due.map((row) => this.#claimAndSend(row.id, from)));
      const sent = results.filter(Boolean).length;
      attempted += sent;
      if (sent === 0 || this.#stopped) return attempted;
    }
  }

  /**
   * Forgets old messages (addresses and texts are personal data): sent ones after 14 days, failed
   * ones after 30. Every instance's worker does it at most hourly; the deletes are idempotent.
   */
  async prune(): Promise<number> {
    const now = this.#seconds();
    this.#prunedAt = now;
    const sent = await this.#db
      .deleteFrom("mail_outbox")
      .where("status", "=", "success")
      .where("sent_at", "<", now - keepSentSeconds)
      .executeTakeFirst();
    const failed = await this.#db
      .deleteFrom("mail_outbox")
      .where("status", "=", "failed")
      .where("created_at", "<", now - keepFailedSeconds)
      .executeTakeFirst();
    return Number(sent.numDeletedRows) + Number(failed.numDeletedRows);
  }

  async #sender(): Promise<{ name: string; address: string }> {
    const rows = await this.#db
      .selectFrom("settings")
      .select(["name", "value"])
      .where("name", "in", ["app_name", "email_sender_address"])
      .execute();
    const stored = new Map(rows.map((row) => [row.name, row.value]));
    return {
      name: decodeSetting("app_name", stored.get("app_name")),
      address: decodeSetting("email_sender_address", stored.get("email_sender_address")),
    };
  }

  async #claimAndSend(id: string, from: { name: string; address: string }): Promise<boolean> {
    const now = this.#seconds();
    const claimToken = randomUUID();
    const lease = now + Math.ceil((this.#timeoutMs * 3) / 1000) + 30;
    const claimed = await this.#db
      .updateTable("mail_outbox")
      .set({ claimed_until: lease, claim_token: claimToken })
      .where("id", "=", id)
      .where(dueAt(now))
      .executeTakeFirst();
    if (Number(claimed.numUpdatedRows) !== 1) return false;
    const message = await this.#db
      .selectFrom("mail_outbox")
      .select(["id", "recipient", "subject", "body", "attempts"])
      .where("id", "=", id)
      .executeTakeFirst();
    if (!message) return false;
    const attempt = message.attempts + 1;
    const started = performance.now();
    let error: string | null = null;
    let permanent = false;
    try {
      await this.#transport.sendMail({
        from,
        to: message.recipient,
        subject: message.subject,
        text: message.body,
        messageId: `<${message.id}@${domainOf(from.address)}>`,
        headers: { "Auto-Submitted": "auto-generated" },
      });
    } catch (failure) {
      error = errorText(failure).slice(0, maxStoredText);
      permanent = isPermanentRejection(failure);
    }
    const success = error === null;
    const finishedAt = this.#seconds();
    const delay = this.#retryDelays[attempt - 1];
    const final = success || permanent || delay === undefined;
    await this.#db
      .updateTable("mail_outbox")
      .set({
        attempts: attempt,
        status: success ? "success" : final ? "failed" : "pending",
        next_attempt_at: final ? null : finishedAt + (delay ?? 0),
        claimed_until: null,
        claim_token: null,
        error,
        sent_at: success ? finishedAt : null,
      })
      .where("id", "=", id)
      .where("claim_token", "=", claimToken)
      .execute();
    const durationSeconds = (performance.now() - started) / 1000;
    this.#onAttempt({ messageId: id, success, final, durationSeconds });
    const log = { message: id, attempt, error };
    if (success) this.#logger.info(log, "e-mail sent");
    else this.#logger.warn(log, final ? "e-mail failed for good" : "e-mail failed, will retry");
    return true;
  }

  #seconds(): number {
    return Math.floor(this.#clock() / 1000);
  }
}

const domainOf = (address: string): string => address.slice(address.lastIndexOf("@") + 1) || "localhost";

/**
 * The relay refused this message or its recipient for good (a 5xx answer to the envelope or the
 * data; 503 is a session-state error and worth a new connection). Refused sign-ins, TLS problems
 * and connection failures are the operator's to fix and are retried: the messages wait meanwhile.
 */
function isPermanentRejection(error: unknown): boolean {
  const { code, responseCode } = (error ?? {}) as { code?: string; responseCode?: number };
  return (
    (code === "EENVELOPE" || code === "EMESSAGE") &&
    typeof responseCode === "number" &&
    responseCode >= 500 &&
    responseCode < 600 &&
    responseCode !== 503
  );
}

const errorText = (error: unknown): string => {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message}: ${cause.message}` : error.message;
  }
  return String(error);
};
