import { randomUUID } from "node:crypto";
import type { Expression, ExpressionBuilder, Kysely, SqlBool } from "kysely";
import type { Database } from "../db/schema.ts";
import type { Logger } from "../logger.ts";
import { webhookRequestHeaders } from "./payload.ts";

export interface DeliveryWorkerOptions {
  /** Seconds to wait after the 1st, 2nd, ... failed attempt; when exhausted the delivery fails. */
  retryDelays?: number[];
  timeoutMs?: number;
  pollIntervalMs?: number;
  concurrency?: number;
  clock?: () => number;
  onAttempt?: (outcome: AttemptOutcome) => void;
}

export interface AttemptOutcome {
  deliveryId: string;
  type: string;
  success: boolean;
  final: boolean;
  durationSeconds: number;
}

const defaultRetryDelays = [10, 60, 360];
const maxStoredText = 4096;

/**
 * Whether a delivery is due at `now`: pending, its next attempt time reached, no live claim, and its
 * endpoint enabled. Deliveries of a disabled endpoint stay pending, untouched (attempts, next attempt
 * time), and go out once the endpoint is enabled again. The poll and the claim use the same rule.
 */
const dueAt =
  (now: number) =>
  (eb: ExpressionBuilder<Database, "webhook_deliveries">): Expression<SqlBool> =>
    eb.and([
      eb("status", "=", "pending"),
      eb("next_attempt_at", "<=", now),
      eb.or([eb("claimed_until", "is", null), eb("claimed_until", "<", now)]),
      eb(
        "webhook_deliveries.endpoint_id",
        "in",
        eb
          .selectFrom("webhook_endpoints")
          .select("webhook_endpoints.id")
          .where("webhook_endpoints.enabled", "=", 1),
      ),
    ]);

/**
 * Sends due outbox rows. A row is claimed with a conditional update that sets a lease, so when
 * several instances (or a restarted one) poll the same table, each attempt is made by one worker;
 * a worker that dies mid-attempt loses its lease and the row becomes due again. The claim also
 * requires the endpoint enabled, so nothing is sent to a disabled endpoint.
 */
export class DeliveryWorker {
  readonly #db: Kysely<Database>;
  readonly #logger: Logger;
  readonly #retryDelays: number[];
  readonly #timeoutMs: number;
  readonly #pollIntervalMs: number;
  readonly #concurrency: number;
  readonly #clock: () => number;
  readonly #onAttempt: (outcome: AttemptOutcome) => void;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #stopped = false;

  constructor(db: Kysely<Database>, logger: Logger, options: DeliveryWorkerOptions = {}) {
    this.#db = db;
    this.#logger = logger;
    this.#retryDelays = options.retryDelays ?? defaultRetryDelays;
    this.#timeoutMs = options.timeoutMs ?? 10000;
    this.#pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.#concurrency = options.concurrency ?? 8;
    this.#clock = options.clock ?? Date.now;
    this.#onAttempt = options.onAttempt ?? (() => {});
  }

  start(): void {
    this.#schedule(0);
  }

  /** Stops polling and waits for attempts under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  #schedule(delay: number) {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.runOnce()
        .then(() => undefined)
        .catch((error: unknown) => this.#logger.warn({ err: errorText(error) }, "webhook worker pass failed"))
        .finally(() => this.#schedule(this.#pollIntervalMs));
    }, delay);
    this.#timer.unref();
  }

  /** One pass: claims and sends every due delivery (in batches). Returns how many were attempted. */
  async runOnce(): Promise<number> {
    let attempted = 0;
    for (;;) {
      const now = this.#seconds();
      const due = await this.#db
        .selectFrom("webhook_deliveries")
        .select("id")
        .where(dueAt(now))
        .orderBy("next_attempt_at")
        .limit(this.#concurrency)
        .execute();
      if (due.length === 0) return attempted;
      const results = await Promise.all(due.map((row) => this.#claimAndSend(row.id)));
      const sent = results.filter(Boolean).length;
      attempted += sent;
      if (sent === 0 || this.#stopped) return attempted;
    }
  }

  async #claimAndSend(id: string): Promise<boolean> {
    const now = this.#seconds();
    const claimToken = randomUUID();
    const lease = now + Math.ceil(this.#timeoutMs / 1000) + 30;
    const claimed = await this.#db
      .updateTable("webhook_deliveries")
      .set({ claimed_until: lease, claim_token: claimToken })
      .where("id", "=", id)
      .where(dueAt(now))
      .executeTakeFirst();
    if (Number(claimed.numUpdatedRows) !== 1) return false;
    const delivery = await this.#db
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
      .executeTakeFirst();
    if (!delivery) return false;
    const attempt = delivery.attempts + 1;
    const started = performance.now();
    let responseCode: number | null = null;
    let responseBody: string | null = null;
    let error: string | null = null;
    try {
      const response = await fetch(delivery.url, {
        method: "POST",
        headers: webhookRequestHeaders(delivery, attempt),
        body: delivery.body,
        redirect: "manual",
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      responseCode = response.status;
      const text = await response.text();
      if (response.status < 200 || response.status > 299) responseBody = text.slice(0, maxStoredText);
    } catch (failure) {
      error = errorText(failure).slice(0, maxStoredText);
    }
    const success = responseCode !== null && responseCode >= 200 && responseCode <= 299;
    const finishedAt = this.#seconds();
    const delay = this.#retryDelays[attempt - 1];
    const final = success || delay === undefined;
    await this.#db
      .updateTable("webhook_deliveries")
      .set({
        attempts: attempt,
        status: success ? "success" : final ? "failed" : "pending",
        next_attempt_at: final ? null : finishedAt + (delay ?? 0),
        claimed_until: null,
        claim_token: null,
        response_code: responseCode,
        response_body: responseBody,
        error,
        delivered_at: finishedAt,
      })
      .where("id", "=", id)
      .where("claim_token", "=", claimToken)
      .execute();
    const durationSeconds = (performance.now() - started) / 1000;
    this.#onAttempt({ deliveryId: id, type: delivery.type, success, final, durationSeconds });
    const log = { delivery: id, type: delivery.type, attempt, status: responseCode, error };
    if (success) this.#logger.info(log, "webhook delivered");
    else
      this.#logger.warn(
        log,
        final ? "webhook delivery failed for good" : "webhook delivery failed, will retry",
      );
    return true;
  }

  #seconds(): number {
    return Math.floor(this.#clock() / 1000);
  }
}

const errorText = (error: unknown): string => {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message}: ${cause.message}` : error.message;
  }
  return String(error);
};
