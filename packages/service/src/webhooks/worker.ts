import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import type { Logger } from "../logger.ts";
import {
  type AttemptResult,
  failureText,
  LeasedOutboxWorker,
  type OutboxWorkerOptions,
  storedText,
} from "../outbox/leased-worker.ts";
import { webhookRequestHeaders } from "./payload.ts";

export type DeliveryWorkerOptions = OutboxWorkerOptions<AttemptOutcome>;

export interface AttemptOutcome {
  deliveryId: string;
  type: string;
  success: boolean;
  final: boolean;
  durationSeconds: number;
}

const defaultRetryDelays = [10, 60, 360];

interface Delivery {
  id: string;
  type: string;
  body: string;
  signature: string;
  attempts: number;
  url: string;
}

interface DeliveryResult extends AttemptResult {
  responseCode: number | null;
  /** The answer's body when it was not a 2xx. */
  responseBody: string | null;
}

/**
 * Sends due webhook deliveries with the leased-outbox worker (outbox/leased-worker.ts): when
 * several instances (or a restarted one) poll the same table, each attempt is made by one worker.
 * A delivery is due only while its endpoint is enabled (the poll and the claim use the same rule):
 * deliveries of a disabled endpoint stay pending, untouched (attempts, next attempt time), and go
 * out once the endpoint is enabled again, so nothing is sent to a disabled endpoint. Old deliveries
 * are pruned by the scheduled job (WebhookService.pruneDelivered), not here.
 */
export class DeliveryWorker extends LeasedOutboxWorker<
  "webhook_deliveries",
  Delivery,
  undefined,
  DeliveryResult
> {
  constructor(db: Kysely<Database>, logger: Logger, options: DeliveryWorkerOptions = {}) {
    const timeoutMs = options.timeoutMs ?? 10000;
    const onAttempt = options.onAttempt ?? (() => {});
    super(db, logger, {
      table: "webhook_deliveries",
      name: "webhook",
      retryDelays: options.retryDelays ?? defaultRetryDelays,
      leaseSeconds: Math.ceil(timeoutMs / 1000) + 30,
      pollIntervalMs: options.pollIntervalMs ?? 1000,
      concurrency: options.concurrency ?? 8,
      clock: options.clock ?? Date.now,
      alsoDue: (eb) =>
        eb(
          "webhook_deliveries.endpoint_id",
          "in",
          eb
            .selectFrom("webhook_endpoints")
            .select("webhook_endpoints.id")
            .where("webhook_endpoints.enabled", "=", 1),
        ),
      load: (id) =>
        db
          .selectFrom("webhook_deliveries")
          .innerJoin("webhook_endpoints", "webhook_endpoints.id", "webhook_deliveries.endpoint_id")
          .select([
            "webhook_deliveries.id",
            "webhook_deliveries.type",
            "webhook_deliveries.body",
            "webhook_deliveries.signature",
            "webhook_deliveries.attempts",
            "webhook_endpoints.url",
          ])
          .where("webhook_deliveries.id", "=", id)
          .executeTakeFirst(),
      deliver: (delivery, attempt) => post(delivery, attempt, timeoutMs),
      record: (result, finishedAt) => ({
        response_code: result.responseCode,
        response_body: result.responseBody,
        delivered_at: finishedAt,
      }),
      report: ({ id, row, attempt, result, final, durationSeconds }) => {
        onAttempt({ deliveryId: id, type: row.type, success: result.success, final, durationSeconds });
        const log = {
          delivery: id,
          type: row.type,
          attempt,
          status: result.responseCode,
          error: result.error,
        };
        if (result.success) logger.info(log, "webhook delivered");
        else
          logger.warn(
            log,
            final ? "webhook delivery failed for good" : "webhook delivery failed, will retry",
          );
      },
    });
  }
}

/** What is read of a receiver's answer: all that is stored of it, and no more. */
export const answerReadLimit = 4096;

/**
 * The first `answerReadLimit` bytes of an answer; the rest is never read (the stream is cancelled,
 * which closes the connection), so a receiver answering a huge body costs us 4 KiB, not its size.
 */
async function readAnswerStart(response: Response): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  try {
    while (length < answerReadLimit) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      length += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  // A character cut at the limit becomes U+FFFD: the text is for people reading the log.
  return Buffer.concat(chunks).subarray(0, answerReadLimit).toString("utf8");
}

/** One attempt: POSTs the stored bytes; a 2xx answer is success, anything else (or no answer) a failure. */
async function post(delivery: Delivery, attempt: number, timeoutMs: number): Promise<DeliveryResult> {
  let responseCode: number | null = null;
  let responseBody: string | null = null;
  let error: string | null = null;
  try {
    const response = await fetch(delivery.url, {
      method: "POST",
      headers: webhookRequestHeaders(delivery, attempt),
      body: delivery.body,
      redirect: "manual",
      signal: AbortSignal.timeout(timeoutMs),
    });
    responseCode = response.status;
    const text = await readAnswerStart(response);
    if (response.status < 200 || response.status > 299) responseBody = storedText(text);
  } catch (failure) {
    error = failureText(failure);
  }
  const success = responseCode !== null && responseCode >= 200 && responseCode <= 299;
  return { success, error, responseCode, responseBody };
}
