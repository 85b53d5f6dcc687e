import { randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import type { Logger } from "../logger.ts";

export interface Job {
  name: string;
  /** Runs once per period; periods are aligned to the Unix epoch (a day starts 00:00 UTC). */
  periodSeconds: number;
  run(): Promise<string>;
}

export interface SchedulerOptions {
  clock?: () => number;
  checkIntervalMs?: number;
}

/**
 * Runs each job once per period, however many instances share the database: an instance runs a
 * job only after moving the job's row to the current period with a conditional update, which
 * exactly one instance can win. A period missed while no instance ran is caught up once at start.
 */
export class Scheduler {
  readonly #db: Kysely<Database>;
  readonly #logger: Logger;
  readonly #jobs: Map<string, Job>;
  readonly #clock: () => number;
  readonly #checkIntervalMs: number;
  readonly #owner = randomUUID();
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<unknown> | null = null;
  #stopped = false;

  constructor(db: Kysely<Database>, logger: Logger, jobs: Job[], options: SchedulerOptions = {}) {
    this.#db = db;
    this.#logger = logger;
    this.#jobs = new Map(jobs.map((job) => [job.name, job]));
    this.#clock = options.clock ?? Date.now;
    this.#checkIntervalMs = options.checkIntervalMs ?? 60000;
  }

  get jobNames(): string[] {
    return [...this.#jobs.keys()];
  }

  start(): void {
    this.#stopped = false;
    const tick = () => {
      this.#running = this.runDue()
        .catch((error: unknown) => this.#logger.warn({ err: String(error) }, "scheduler pass failed"))
        .finally(() => {
          // A pass that ends after stop() must not schedule the next one.
          if (this.#stopped) return;
          this.#timer = setTimeout(tick, this.#checkIntervalMs);
          this.#timer.unref();
        });
    };
    this.#timer = setTimeout(tick, 0);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  /** Runs every job whose current period this instance wins; returns the names it ran. */
  async runDue(): Promise<string[]> {
    const ran: string[] = [];
    for (const job of this.#jobs.values()) {
      if (await this.#claim(job)) {
        await this.#execute(job);
        ran.push(job.name);
      }
    }
    return ran;
  }

  /** Runs one job now, outside its schedule (the console's app:jobs:run). */
  async runNow(name: string): Promise<string> {
    const job = this.#jobs.get(name);
    if (!job) throw new Error(`unknown job ${name} (known: ${this.jobNames.join(", ")})`);
    return this.#execute(job);
  }

  async #claim(job: Job): Promise<boolean> {
    const now = Math.floor(this.#clock() / 1000);
    const period = Math.floor(now / job.periodSeconds) * job.periodSeconds;
    const claim = {
      period_start: period,
      started_at: now,
      finished_at: null,
      owner: this.#owner,
      result: null,
    };
    const existing = await this.#db
      .selectFrom("job_runs")
      .select("period_start")
      .where("name", "=", job.name)
      .executeTakeFirst();
    if (!existing) {
      try {
        await this.#db
          .insertInto("job_runs")
          .values({ name: job.name, ...claim })
          .execute();
        return true;
      } catch {
        // Another instance inserted the row first; fall through to the conditional update.
      }
    }
    const updated = await this.#db
      .updateTable("job_runs")
      .set(claim)
      .where("name", "=", job.name)
      .where("period_start", "<", period)
      .executeTakeFirst();
    return Number(updated.numUpdatedRows) === 1;
  }

  async #execute(job: Job): Promise<string> {
    this.#logger.info({ job: job.name }, "job started");
    try {
      const result = await job.run();
      await this.#db
        .updateTable("job_runs")
        .set({ finished_at: Math.floor(this.#clock() / 1000), result })
        .where("name", "=", job.name)
        .where("owner", "=", this.#owner)
        .execute();
      this.#logger.info({ job: job.name, result }, "job finished");
      return result;
    } catch (error) {
      this.#logger.error({ job: job.name, err: String(error) }, "job failed");
      throw error;
    }
  }
}
