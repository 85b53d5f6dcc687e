import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import { nowSeconds } from "./users.ts";

/**
 * The brute-force policy of every door (web, IMAP and SMTP through the integration API, webmail,
 * identity): consecutive failed sign-ins of one account, and from one client address, make the next
 * attempt wait, longer with each failure. State lives in the database so every instance sees it.
 *
 * An attacker must not be able to lock a victim out: the account's delay is capped at a minute, and
 * it does not apply to a client address with no failure of its own, so the owner signing in from a
 * clean address gets in at once while the attacker's addresses wait.
 */
export interface ThrottlePolicy {
  /** Failures allowed before any delay. */
  freeFailures: number;
  /** The first delay in seconds; it doubles with each further failure. */
  firstDelay: number;
  maxDelay: number;
}

export const accountPolicy: ThrottlePolicy = { freeFailures: 5, firstDelay: 5, maxDelay: 60 };
export const clientPolicy: ThrottlePolicy = { freeFailures: 5, firstDelay: 5, maxDelay: 300 };
/** A counter with no failure for this long starts again from zero. */
export const forgetAfterSeconds = 3600;

export const delayAfter = (policy: ThrottlePolicy, failures: number): number =>
  failures < policy.freeFailures
    ? 0
    : Math.min(policy.maxDelay, policy.firstDelay * 2 ** (failures - policy.freeFailures));

export interface ThrottleSubjects {
  /** The address the sign-in names (known or not: unknown ones are throttled alike). */
  account: string;
  /** The client's IP address, when the door knows it. */
  client?: string | undefined;
}

const accountKey = (account: string) => `account:${account.toLowerCase().slice(0, 300)}`;
const clientKey = (client: string) => `client:${client.slice(0, 64)}`;

export class SignInThrottle {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** Seconds until the next attempt may be checked; 0 = go ahead. */
  async retryAfter(subjects: ThrottleSubjects, now = nowSeconds()): Promise<number> {
    const keys = [accountKey(subjects.account)];
    if (subjects.client) keys.push(clientKey(subjects.client));
    const rows = await this.#db
      .selectFrom("sign_in_failures")
      .select(["subject", "blocked_until", "last_failure_at"])
      .where("subject", "in", keys)
      .execute();
    const live = rows.filter((row) => Number(row.last_failure_at) > now - forgetAfterSeconds);
    const client = subjects.client ? live.find((row) => row.subject === keys[1]) : undefined;
    let wait = 0;
    for (const row of live) {
      // A known, clean client address is not held back by the account's counter.
      if (row.subject === keys[0] && subjects.client && !client) continue;
      wait = Math.max(wait, Number(row.blocked_until) - now);
    }
    return Math.max(0, wait);
  }

  async recordFailure(subjects: ThrottleSubjects, now = nowSeconds()): Promise<void> {
    await this.#count(accountKey(subjects.account), accountPolicy, now);
    if (subjects.client) await this.#count(clientKey(subjects.client), clientPolicy, now);
  }

  /** A successful sign-in clears the account's counter (not the client's: one good account must not launder an address). */
  async recordSuccess(subjects: ThrottleSubjects): Promise<void> {
    await this.#db
      .deleteFrom("sign_in_failures")
      .where("subject", "=", accountKey(subjects.account))
      .execute();
  }

  /** Counters nobody has added to for a while; run by the cleanup job. */
  async forgetOld(now = nowSeconds()): Promise<number> {
    const result = await this.#db
      .deleteFrom("sign_in_failures")
      .where("last_failure_at", "<", now - forgetAfterSeconds)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  async #count(subject: string, policy: ThrottlePolicy, now: number): Promise<void> {
    const stale = now - forgetAfterSeconds;
    for (let attempt = 0; attempt < 3; attempt++) {
      const updated = await this.#db
        .updateTable("sign_in_failures")
        .set((eb) => ({
          failures: eb
            .case()
            .when("last_failure_at", "<", stale)
            .then(1)
            .else(eb("failures", "+", 1))
            .end(),
          last_failure_at: now,
        }))
        .where("subject", "=", subject)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0) {
        try {
          await this.#db
            .insertInto("sign_in_failures")
            .values({
              subject,
              failures: 1,
              last_failure_at: now,
              blocked_until: now + delayAfter(policy, 1),
            })
            .execute();
          return;
        } catch {
          continue; // another instance inserted it first: count on its row
        }
      }
      const row = await this.#db
        .selectFrom("sign_in_failures")
        .select("failures")
        .where("subject", "=", subject)
        .executeTakeFirst();
      const blockedUntil = now + delayAfter(policy, Number(row?.failures ?? 1));
      await this.#db
        .updateTable("sign_in_failures")
        .set({ blocked_until: blockedUntil })
        .where("subject", "=", subject)
        .where("blocked_until", "<", blockedUntil)
        .execute();
      return;
    }
  }
}
