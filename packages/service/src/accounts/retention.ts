import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { recordActivity } from "./activity.ts";
import { inactiveSince, inactivityCutoffs } from "./inactivity.ts";
import { isActiveUser } from "./queries.ts";
import type { SettingsService } from "./settings.ts";
import { nowSeconds, type UserService } from "./users.ts";

export const timestampInFuture = refusal(
  "retention.timestamp_in_future",
  "bad_request",
  () => "timestamp in future",
);

/** What the mailbox janitor asks and reports: the inactive users, and activity seen on the mail server. */
export class RetentionService {
  readonly #db: Kysely<Database>;
  readonly #users: UserService;
  readonly #settings: SettingsService;

  constructor(db: Kysely<Database>, users: UserService, settings: SettingsService) {
    this.#db = db;
    this.#users = users;
    this.#settings = settings;
  }

  /**
   * Active users inactive for `inactive_user_days` (two years by default; never signed in: counted
   * from creation), exempt roles included: the janitor may still touch them.
   */
  async inactiveUsers(now = nowSeconds()): Promise<string[]> {
    const cutoff = (await inactivityCutoffs(this.#settings, now)).listed;
    const rows = await this.#db
      .selectFrom("users")
      .select("email")
      .where(isActiveUser)
      .where(inactiveSince(cutoff))
      .orderBy("id")
      .execute();
    return rows.map((row) => row.email);
  }

  /** Stores a reported activity time exactly, if it is newer than what is stored. */
  async touch(rawEmail: string, timestamp: number | null): Promise<void> {
    const now = nowSeconds();
    if (timestamp !== null && timestamp > now) throw timestampInFuture();
    const user = await this.#users.getActive(rawEmail);
    const at = timestamp === null || timestamp === 0 ? now : timestamp;
    await recordActivity(this.#db, user, { kind: "reported", at });
  }
}
