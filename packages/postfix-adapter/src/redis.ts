/**
 * Sliding-window quota counters in Redis, shared by every adapter that uses the same REDIS_URL.
 *
 * One sorted set per sender (`postfix-adapter:quota:<sender>`): a member per message, scored by
 * its send time in milliseconds. A Lua script drops what is older than a day, counts the hour and
 * the day, and adds the message only if both are below their limits: Redis runs a script as one
 * step, so two adapters cannot both take a sender's last message. The time is Redis's own (TIME),
 * so adapters on hosts with different clocks agree. The key expires a day after its last message.
 *
 * Redis unreachable or slow: commands fail at once (no offline queue, one attempt, a timeout of
 * SERVICE_TIMEOUT) and the policy lets mail pass (fail-open); the client reconnects by itself.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import type { Logger } from "pino";
import type { Metrics } from "./metrics.ts";
import {
  CountersUnavailable,
  DAY_MS,
  HOUR_MS,
  type Limits,
  type QuotaCounters,
  type Usage,
} from "./policy.ts";

export const KEY_PREFIX = "postfix-adapter:quota:";

const SCRIPT = `
local key = KEYS[1]
local per_hour = tonumber(ARGV[1])
local per_day = tonumber(ARGV[2])
local record = ARGV[3] == "1"
local time = redis.call("TIME")
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", key, "-inf", now - ${DAY_MS})
local day = redis.call("ZCARD", key)
local hour = redis.call("ZCOUNT", key, "(" .. (now - ${HOUR_MS}), "+inf")
local allowed = (per_hour == 0 or hour < per_hour) and (per_day == 0 or day < per_day)
if allowed and record then
  redis.call("ZADD", key, now, now .. "-" .. ARGV[4])
  redis.call("PEXPIRE", key, ${DAY_MS})
  hour = hour + 1
  day = day + 1
end
return {allowed and 1 or 0, hour, day}
`;

type QuotaRedis = Redis & {
  quotaUse(
    key: string,
    perHour: number,
    perDay: number,
    record: string,
    id: string,
  ): Promise<[number, number, number]>;
};

export interface RedisCountersOptions {
  url: string;
  timeoutMs: number;
  logger: Logger;
  metrics: Metrics;
}

export class RedisCounters implements QuotaCounters {
  readonly kind = "redis";
  readonly #redis: QuotaRedis;
  readonly #logger: Logger;
  readonly #metrics: Metrics;
  #ready = false;

  constructor(options: RedisCountersOptions) {
    this.#logger = options.logger;
    this.#metrics = options.metrics;
    this.#metrics.redisUp.set({}, 0);
    this.#redis = new Redis(options.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.timeoutMs,
      connectTimeout: Math.max(options.timeoutMs, 1000),
      // Reconnect for ever, at most every 5 s: the policy fails open meanwhile.
      retryStrategy: (attempt) => Math.min(attempt * 250, 5000),
    }) as QuotaRedis;
    this.#redis.defineCommand("quotaUse", { numberOfKeys: 1, lua: SCRIPT });
    this.#redis.on("ready", () => {
      if (!this.#ready) this.#logger.info("redis ready: quota counters shared");
      this.#ready = true;
      this.#metrics.redisUp.set({}, 1);
    });
    this.#redis.on("error", (error: Error) => {
      // ioredis emits every failed reconnect; one line when the connection goes, the rest at debug.
      if (this.#ready)
        this.#logger.error({ err: error.message }, "redis unavailable: quotas not enforced (fail-open)");
      else this.#logger.debug({ err: error.message }, "redis still unavailable");
      this.#markDown();
    });
    this.#redis.on("close", () => this.#markDown());
  }

  #markDown(): void {
    if (this.#ready) this.#logger.warn("redis connection closed: quotas not enforced until it is back");
    this.#ready = false;
    this.#metrics.redisUp.set({}, 0);
  }

  /** Waits until Redis is ready or `ms` have passed (start-up; not required to start). */
  async waitReady(ms: number): Promise<boolean> {
    if (this.#ready) return true;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#redis.off("ready", onReady);
        resolve(false);
      }, ms);
      const onReady = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.#redis.once("ready", onReady);
    });
  }

  async use(sender: string, limits: Limits, record: boolean): Promise<Usage> {
    let reply: [number, number, number];
    try {
      reply = await this.#redis.quotaUse(
        KEY_PREFIX + sender,
        limits.perHour,
        limits.perDay,
        record ? "1" : "0",
        randomUUID(),
      );
    } catch (error) {
      throw new CountersUnavailable(`redis: ${error instanceof Error ? error.message : String(error)}`);
    }
    const [allowed, hour, day] = reply;
    return { allowed: allowed === 1, hour, day };
  }

  state(): string {
    return this.#ready ? "ready" : "unavailable";
  }

  async close(): Promise<void> {
    this.#redis.disconnect();
  }
}
