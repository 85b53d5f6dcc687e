import type { Kysely } from "kysely";
import { createTransport } from "nodemailer";
import { decodeSetting } from "../accounts/settings.ts";
import type { Database } from "../db/schema.ts";
import type { Logger } from "../logger.ts";
import { failureText, LeasedOutboxWorker, type OutboxWorkerOptions } from "../outbox/leased-worker.ts";

export type MailWorkerOptions = OutboxWorkerOptions<MailAttemptOutcome>;

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
/** Sent messages are kept this long (to answer "was it sent?"), failed ones longer (to be retried by hand). */
export const keepSentSeconds = 14 * 86400;
export const keepFailedSeconds = 30 * 86400;

interface Sender {
  name: string;
  address: string;
}

/**
 * Sends due rows of the e-mail outbox through the SMTP relay (SMTP_URL) with the leased-outbox
 * worker (outbox/leased-worker.ts), like the webhook deliveries: several instances never send one
 * attempt twice. From is built at sending (`email_sender_address` with the display name
 * `app_name`), the Message-ID from the row's id, so a relay that got a message but whose answer was
 * lost sees the retry as the same message. Sent messages are forgotten after 14 days, failed ones
 * after 30 (addresses and texts are personal data); every instance's worker prunes at most hourly.
 * Only ids, attempt numbers and SMTP errors are logged, never a subject or body.
 */
export class MailWorker extends LeasedOutboxWorker<
  "mail_outbox",
  { id: string; recipient: string; subject: string; body: string; attempts: number },
  Sender
> {
  readonly #transport: ReturnType<typeof createTransport>;

  constructor(db: Kysely<Database>, logger: Logger, smtpUrl: string, options: MailWorkerOptions = {}) {
    const timeoutMs = options.timeoutMs ?? 30000;
    // The URL's own options (user:password@, ?tls.rejectUnauthorized=false, ...) win over these
    // timeouts, which bound an attempt so a hanging relay cannot hold a lease for long.
    const transport = createTransport({
      url: smtpUrl,
      connectionTimeout: timeoutMs,
      greetingTimeout: timeoutMs,
      socketTimeout: timeoutMs,
    });
    const onAttempt = options.onAttempt ?? (() => {});
    super(db, logger, {
      table: "mail_outbox",
      name: "mail",
      retryDelays: options.retryDelays ?? defaultMailRetryDelays,
      // Connecting, the greeting and the data each have the timeout.
      leaseSeconds: Math.ceil((timeoutMs * 3) / 1000) + 30,
      pollIntervalMs: options.pollIntervalMs ?? 2000,
      concurrency: options.concurrency ?? 4,
      clock: options.clock ?? Date.now,
      beforeBatch: () => sender(db),
      load: (id) =>
        db
          .selectFrom("mail_outbox")
          .select(["id", "recipient", "subject", "body", "attempts"])
          .where("id", "=", id)
          .executeTakeFirst(),
      deliver: async (message, _attempt, from) => {
        try {
          await transport.sendMail({
            from,
            to: message.recipient,
            subject: message.subject,
            text: message.body,
            messageId: `<${message.id}@${domainOf(from.address)}>`,
            headers: { "Auto-Submitted": "auto-generated" },
          });
          return { success: true, error: null };
        } catch (failure) {
          return { success: false, permanent: isPermanentRejection(failure), error: failureText(failure) };
        }
      },
      record: (result, finishedAt) => ({ sent_at: result.success ? finishedAt : null }),
      report: ({ id, attempt, result, final, durationSeconds }) => {
        onAttempt({ messageId: id, success: result.success, final, durationSeconds });
        const log = { message: id, attempt, error: result.error };
        if (result.success) logger.info(log, "e-mail sent");
        else logger.warn(log, final ? "e-mail failed for good" : "e-mail failed, will retry");
      },
      prune: {
        everySeconds: 3600,
        rules: [
          { status: "success", column: "sent_at", keepSeconds: keepSentSeconds },
          { status: "failed", column: "created_at", keepSeconds: keepFailedSeconds },
        ],
      },
    });
    this.#transport = transport;
  }

  /** Stops polling, waits for the attempts under way, then closes the relay connections. */
  override async stop(): Promise<void> {
    await super.stop();
    this.#transport.close();
  }
}

/** The From of this batch's messages, from the settings (an admin may change them at any time). */
async function sender(db: Kysely<Database>): Promise<Sender> {
  const rows = await db
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
