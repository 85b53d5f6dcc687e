import { type Kysely, sql } from "kysely";
import { type Actor, domainScope } from "../accounts/admin-scope.ts";
import { isActiveUser } from "../accounts/queries.ts";
import { nowSeconds } from "../accounts/users.ts";
import type { Database } from "../db/schema.ts";
import type { WebhookService } from "../webhooks/endpoints.ts";

const day = 86400;
const week = 7 * day;
export const chartWeeks = 12;

/** One week of the chart: sign-ups in it, and the active (not deleted) accounts at its end. */
export interface WeekFigures {
  /** Unix seconds of the week's first day, 00:00 UTC. */
  start: number;
  signUps: number;
  activeAccounts: number;
}

/** The dashboard's figures (reference 5.8), of the actor's domain for a domain admin. */
export interface DashboardFigures {
  activeUsers: number;
  newUsers7Days: number;
  weeklyActive: number;
  monthlyActive: number;
  activeAliases: number;
  openPgpKeys: number;
  /** For admins only (null for a domain admin): the installation's domains, invite codes and webhooks. */
  domains: number | null;
  inviteCodes: { redeemed: number; unredeemed: number };
  webhooks: { pending: number; failed: number } | null;
  weeks: WeekFigures[];
}

type CountRow = { n: number | string | bigint } | undefined;
const count = (row: CountRow) => Number(row?.n ?? 0);

export class AdminDashboard {
  readonly #db: Kysely<Database>;
  readonly #webhooks: WebhookService;

  constructor(db: Kysely<Database>, webhooks: WebhookService) {
    this.#db = db;
    this.#webhooks = webhooks;
  }

  async figures(actor: Actor, now = nowSeconds()): Promise<DashboardFigures> {
    const db = this.#db;
    const scope = domainScope(actor);
    const users = () => {
      const q = db.selectFrom("users").select((eb) => eb.fn.countAll<number>().as("n"));
      return scope === null ? q : q.where("domain_id", "=", scope);
    };
    const active = () => users().where(isActiveUser);
    const aliases = db
      .selectFrom("aliases")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("deleted", "=", 0);
    const keys = db.selectFrom("openpgp_keys").select((eb) => eb.fn.countAll<number>().as("n"));
    const codes = db.selectFrom("invite_codes").select((eb) => eb.fn.countAll<number>().as("n"));
    const [
      activeUsers,
      newUsers,
      weekly,
      monthly,
      aliasCount,
      keyCount,
      redeemed,
      unredeemed,
      domains,
      webhooks,
      weeks,
    ] = await Promise.all([
      active().executeTakeFirst(),
      users()
        .where("created_at", ">=", now - 7 * day)
        .executeTakeFirst(),
      active()
        .where("last_login_time", ">=", now - 7 * day)
        .executeTakeFirst(),
      active()
        .where("last_login_time", ">=", now - 30 * day)
        .executeTakeFirst(),
      (scope === null ? aliases : aliases.where("domain_id", "=", scope)).executeTakeFirst(),
      (scope === null ? keys : keys.where("domain_id", "=", scope)).executeTakeFirst(),
      (scope === null ? codes : codes.where("domain_id", "=", scope))
        .where("redeemed_at", "is not", null)
        .executeTakeFirst(),
      (scope === null ? codes : codes.where("domain_id", "=", scope))
        .where("redeemed_at", "is", null)
        .executeTakeFirst(),
      scope === null
        ? db
            .selectFrom("domains")
            .select((eb) => eb.fn.countAll<number>().as("n"))
            .executeTakeFirst()
        : Promise.resolve(undefined),
      scope === null ? this.#webhooks.backlog() : Promise.resolve(null),
      this.#weeks(scope, now),
    ]);
    return {
      activeUsers: count(activeUsers),
      newUsers7Days: count(newUsers),
      weeklyActive: count(weekly),
      monthlyActive: count(monthly),
      activeAliases: count(aliasCount),
      openPgpKeys: count(keyCount),
      domains: scope === null ? count(domains) : null,
      inviteCodes: { redeemed: count(redeemed), unredeemed: count(unredeemed) },
      webhooks,
      weeks,
    };
  }

  /**
   * Twelve weeks ending with the current one, in one pass over the users: sign-ups per week
   * (deleted accounts included: they signed up), and the accounts active at each week's end,
   * that is created by then and not deleted by then (a deleted account's last change is its
   * deletion). The history comes from the users table itself, so it needs no bookkeeping.
   */
  async #weeks(scope: number | null, now: number): Promise<WeekFigures[]> {
    const today = Math.floor(now / day) * day;
    const starts = Array.from(
      { length: chartWeeks },
      (_, i) => today - (chartWeeks - 1 - i) * week - 6 * day,
    );
    const ends = starts.map((start) => Math.min(start + week, now + 1));
    const deleted = 1;
    const columns = starts.flatMap((start, i) => {
      const end = ends[i] as number;
      return [
        sql<number>`SUM(CASE WHEN created_at >= ${start} AND created_at < ${end} THEN 1 ELSE 0 END)`.as(
          `s${i}`,
        ),
        sql<number>`SUM(CASE WHEN created_at < ${end} AND (deleted <> ${deleted} OR updated_at >= ${end}) THEN 1 ELSE 0 END)`.as(
          `a${i}`,
        ),
      ];
    });
    let query = this.#db.selectFrom("users").select(columns);
    if (scope !== null) query = query.where("domain_id", "=", scope);
    const row = ((await query.executeTakeFirst()) ?? {}) as Record<string, unknown>;
    return starts.map((start, i) => ({
      start,
      signUps: Number(row[`s${i}`] ?? 0),
      activeAccounts: Number(row[`a${i}`] ?? 0),
    }));
  }
}
