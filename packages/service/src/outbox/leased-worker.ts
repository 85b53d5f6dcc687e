import { randomUUID } from "node:crypto";
import type { Expression, ExpressionBuilder, Kysely, SqlBool, Updateable } from "kysely";
import type { Database, LeasedOutboxColumns, UnixTime } from "../db/schema.ts";
import type { Logger } from "../logger.ts";

/** The tables that have the lease's columns. */
export type LeasedOutboxTable = {
  [T in keyof Database]: Database[T] extends LeasedOutboxColumns ? T : never;
}[keyof Database];

/**
 * The database as this module sees it: every outbox reduced to the columns the lease needs, so one
 * query serves each outbox (a generic table name defeats Kysely's column types).
 */
type Outboxes = Record<LeasedOutboxTable, LeasedOutboxColumns>;

/** What a user of the worker may set; each user has its own defaults. */
export interface OutboxWorkerOptions<Outcome> {
  /** Seconds to wait after the 1st, 2nd, ... failed attempt; when exhausted the row fails. */
  retryDelays?: number[];
  /** How long one attempt may take; the lease outlasts it. */
  timeoutMs?: number;
  pollIntervalMs?: number;
  /** Rows claimed and attempted at once. */
  concurrency?: number;
  clock?: () => number;
  onAttempt?: (outcome: Outcome) => void;
}

/** The result of one attempt, as the delivery callback gives it. */
export interface AttemptResult {
  success: boolean;
  /** Refused for good: no retry even if the schedule has one left. */
  permanent?: boolean;
  /** Stored in the row's `error` column (see failureText). */
  error: string | null;
}

/** One finished attempt, recorded in the row; what a user logs and counts. */
export interface FinishedAttempt<Row, Result> {
  id: string;
  row: Row;
  /** 1 for the first attempt. */
  attempt: number;
  result: Result;
  /** No further attempt: succeeded, refused for good or out of retries. */
  final: boolean;
  durationSeconds: number;
}

/** Rows of one status older than `keepSeconds` by one of their time columns are deleted. */
export interface PruneRule<T extends LeasedOutboxTable> {
  status: "success" | "failed";
  column: keyof Database[T] & string;
  keepSeconds: number;
}

/** What one user of the worker gives it: its table, its timings, how to send and what to record. */
export interface LeasedOutbox<T extends LeasedOutboxTable, Row extends { attempts: number }, Batch, Result> {
  table: T;
  /** Names the worker in its log line when a pass fails: "<name> worker pass failed". */
  name: string;
  retryDelays: number[];
  /** Seconds a claim holds a row: longer than an attempt can take. */
  leaseSeconds: number;
  pollIntervalMs: number;
  concurrency: number;
  clock: () => number;
  /** Further conditions for a row to be due (the webhook endpoint is enabled); used by the poll and the claim alike. */
  alsoDue?: (eb: ExpressionBuilder<Database, T>) => Expression<SqlBool>;
  /** Read once per batch of claims and given to each delivery of the batch (the e-mail sender). */
  beforeBatch?: () => Promise<Batch>;
  /** Reads a claimed row: what the delivery needs, and its attempts so far. */
  load: (id: string) => Promise<Row | undefined>;
  /** Makes one attempt. Catches its own failures: they are a result, not an exception. */
  deliver: (row: Row, attempt: number, batch: Batch) => Promise<Result>;
  /** The user's own columns recorded with the attempt, besides the lease, status and error. */
  record: (result: Result, finishedAt: UnixTime) => Updateable<Database[T]>;
  /** Called after the attempt is recorded: logs and metrics. */
  report: (attempt: FinishedAttempt<Row, Result>) => void;
  /** Old rows to forget, checked at most every `everySeconds` by each worker. */
  prune?: { everySeconds: number; rules: PruneRule<T>[] };
}

/** A text as stored in an outbox row (an error, a response body): cut to 4096 characters. */
export const storedText = (text: string): string => text.slice(0, 4096);

/** An error's message, with its cause's (fetch and nodemailer put the useful part there). */
const errorText = (error: unknown): string => {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message}: ${cause.message}` : error.message;
  }
  return String(error);
};

/** A failed attempt's error as stored in the row's `error` column. */
export const failureText = (error: unknown): string => storedText(errorText(error));

/**
 * Delivers the due rows of one outbox table. A row is claimed with a conditional update that sets a
 * lease (`claimed_until`, `claim_token`), so when several instances (or a restarted one) poll the same
 * table, each attempt is made by one worker; a worker that dies mid-attempt loses its lease and the
 * row becomes due again. The attempt is recorded only under the worker's own claim token, so a
 * worker whose lease ran out cannot overwrite what the next one recorded. After a failure the row
 * waits for the next delay of the schedule; when the schedule is exhausted (or the failure is
 * permanent) it is failed. What is sent, how, and what else is recorded belong to the user.
 */
export class LeasedOutboxWorker<
  T extends LeasedOutboxTable,
  Row extends { attempts: number },
  Batch = undefined,
  Result extends AttemptResult = AttemptResult,
> {
  readonly #db: Kysely<Database>;
  /** The same database, seen as outboxes (see Outboxes). */
  readonly #outboxes: Kysely<Outboxes>;
  readonly #logger: Logger;
  readonly #outbox: LeasedOutbox<T, Row, Batch, Result>;
  /** The same table name, typed as one of the outboxes (see Outboxes). */
  readonly #table: LeasedOutboxTable;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #stopped = false;
  #prunedAt = 0;

  constructor(db: Kysely<Database>, logger: Logger, outbox: LeasedOutbox<T, Row, Batch, Result>) {
    this.#db = db;
    this.#outboxes = db as unknown as Kysely<Outboxes>;
    this.#logger = logger;
    this.#outbox = outbox;
    this.#table = outbox.table;
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
  }

  #schedule(delay: number) {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.runOnce()
        .then(() => undefined)
        .catch((error: unknown) =>
          this.#logger.warn({ err: errorText(error) }, `${this.#outbox.name} worker pass failed`),
        )
        .finally(() => this.#schedule(this.#outbox.pollIntervalMs));
    }, delay);
    this.#timer.unref();
  }

  /** One pass: claims and delivers every due row (in batches). Returns how many were attempted. */
  async runOnce(): Promise<number> {
    const { prune } = this.#outbox;
    if (prune && this.#seconds() - this.#prunedAt >= prune.everySeconds) await this.prune();
    let attempted = 0;
    for (;;) {
      const now = this.#seconds();
      const due = await this.#outboxes
        .selectFrom(this.#table)
        .select("id")
        .where(this.#dueAt(now))
        .orderBy("next_attempt_at")
        .limit(this.#outbox.concurrency)
        .execute();
      if (due.length === 0) return attempted;
      const batch = (await this.#outbox.beforeBatch?.()) as Batch;
      const results = await Promise.all(due.map((row) => this.#claimAndDeliver(row.id, batch)));
      const delivered = results.filter(Boolean).length;
      attempted += delivered;
      if (delivered === 0 || this.#stopped) return attempted;
    }
  }

  /**
   * Deletes the rows the prune rules name (finished rows past their keeping time). The deletes are
   * idempotent, so every instance's worker may run them. Returns how many rows were deleted.
   */
  async prune(): Promise<number> {
    const now = this.#seconds();
    this.#prunedAt = now;
    let deleted = 0;
    for (const rule of this.#outbox.prune?.rules ?? []) {
      deleted += await pruneOutbox(this.#db, this.#outbox.table, rule, now);
    }
    return deleted;
  }

  /** Pending, its next attempt time reached, no live claim, and whatever else the user requires. */
  #dueAt(now: number) {
    return (eb: ExpressionBuilder<Outboxes, LeasedOutboxTable>): Expression<SqlBool> => {
      const { alsoDue } = this.#outbox;
      return eb.and([
        eb("status", "=", "pending"),
        eb("next_attempt_at", "<=", now),
        eb.or([eb("claimed_until", "is", null), eb("claimed_until", "<", now)]),
        // The user's condition is written against the real schema; the builder is the same.
        ...(alsoDue ? [alsoDue(eb as unknown as ExpressionBuilder<Database, T>)] : []),
      ]);
    };
  }

  async #claimAndDeliver(id: string, batch: Batch): Promise<boolean> {
    const now = this.#seconds();
    const claimToken = randomUUID();
    const claimed = await this.#outboxes
      .updateTable(this.#table)
      .set({ claimed_until: now + this.#outbox.leaseSeconds, claim_token: claimToken })
      .where("id", "=", id)
      .where(this.#dueAt(now))
      .executeTakeFirst();
    if (Number(claimed.numUpdatedRows) !== 1) return false;
    const row = await this.#outbox.load(id);
    if (!row) return false;
    const attempt = row.attempts + 1;
    const started = performance.now();
    const result = await this.#outbox.deliver(row, attempt, batch);
    const finishedAt = this.#seconds();
    const delay = this.#outbox.retryDelays[attempt - 1];
    const final = result.success || result.permanent === true || delay === undefined;
    await this.#outboxes
      .updateTable(this.#table)
      .set({
        ...(this.#outbox.record(result, finishedAt) as Updateable<LeasedOutboxColumns>),
        attempts: attempt,
        status: result.success ? "success" : final ? "failed" : "pending",
        next_attempt_at: final ? null : finishedAt + (delay ?? 0),
        claimed_until: null,
        claim_token: null,
        error: result.error,
      })
      .where("id", "=", id)
      .where("claim_token", "=", claimToken)
      .execute();
    const durationSeconds = (performance.now() - started) / 1000;
    this.#outbox.report({ id, row, attempt, result, final, durationSeconds });
    return true;
  }

  #seconds(): number {
    return Math.floor(this.#outbox.clock() / 1000);
  }
}

/** Deletes one outbox's rows of the rule's status older than its keeping time at `now`; returns how many. */
export async function pruneOutbox<T extends LeasedOutboxTable>(
  db: Kysely<Database>,
  table: T,
  rule: PruneRule<T>,
  now: UnixTime,
): Promise<number> {
  const outboxes = db as unknown as Kysely<Outboxes>;
  const result = await outboxes
    .deleteFrom(table as LeasedOutboxTable)
    .where("status", "=", rule.status)
    .where(outboxes.dynamic.ref(rule.column), "<", now - rule.keepSeconds)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
