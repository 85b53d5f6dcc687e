/**
 * Sliding-window quota counters in this process's memory: right for one adapter. Several adapters
 * (several mail hosts, or one behind a load balancer) need REDIS_URL (redis.ts), or each would
 * allow the whole quota.
 */
import { DAY_MS, HOUR_MS, type Limits, type QuotaCounters, type Usage } from "./policy.ts";

/** How often senders with nothing in the last day are forgotten. */
const SWEEP_INTERVAL_MS = 10 * 60_000;

export class MemoryCounters implements QuotaCounters {
  readonly kind = "memory";
  /** Per sender, the send times of the last day in ascending order. */
  readonly #sent = new Map<string, number[]>();
  readonly #sweeper: NodeJS.Timeout;
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
    this.#sweeper = setInterval(() => this.#sweep(), SWEEP_INTERVAL_MS);
    this.#sweeper.unref();
  }

  async use(sender: string, limits: Limits, record: boolean): Promise<Usage> {
    const now = this.#now();
    const times = this.#sent.get(sender) ?? [];
    // Times are ascending: drop what fell out of the day, count what is inside the hour.
    let first = 0;
    while (first < times.length && (times[first] as number) <= now - DAY_MS) first += 1;
    if (first > 0) times.splice(0, first);
    let hour = 0;
    for (let i = times.length - 1; i >= 0 && (times[i] as number) > now - HOUR_MS; i--) hour += 1;
    let day = times.length;
    const allowed =
      (limits.perHour === 0 || hour < limits.perHour) && (limits.perDay === 0 || day < limits.perDay);
    if (allowed && record) {
      times.push(Math.max(now, times[times.length - 1] ?? now));
      hour += 1;
      day += 1;
    }
    if (times.length > 0) this.#sent.set(sender, times);
    else this.#sent.delete(sender);
    return { allowed, hour, day };
  }

  state(): string {
    return "memory";
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper);
  }

  #sweep(): void {
    const cutoff = this.#now() - DAY_MS;
    for (const [sender, times] of this.#sent) {
      if ((times[times.length - 1] ?? 0) <= cutoff) this.#sent.delete(sender);
    }
  }
}
