import type { Kysely } from "kysely";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { isActiveUser } from "../accounts/queries.ts";
import { derivationsSoFar } from "../credentials/derivations.ts";
import type { Database } from "../db/schema.ts";
import { nodeVersion, serviceVersion } from "../version.ts";

const day = 86400;

/** Account figures of the reference's `app:metrics` (same names, so existing dashboards keep working). */
const accountGauges = [
  ["userli_users_total", "Total number of users"],
  ["userli_users_active_total", "Total number of active users"],
  ["userli_users_deleted_total", "Total number of deleted users"],
  ["userli_users_recovery_token_total", "Total number of users with recovery token"],
  ["userli_users_mailcrypt_total", "Total number of users with enabled mailcrypt"],
  ["userli_users_twofactor_total", "Total number of users with enabled two factor authentication"],
  ["userli_users_weekly_active_total", "Number of users who logged in within the last 7 days"],
  ["userli_users_monthly_active_total", "Number of users who logged in within the last 30 days"],
  ["userli_domains_total", "Total number of domains"],
  ["userli_aliases_total", "Total number of aliases"],
  ["userli_openpgpkeys_total", "Total number of OpenPGP keys"],
] as const;
type AccountGauge = (typeof accountGauges)[number][0];

/** Counts straight from the database: the same on every instance. */
export async function accountFigures(
  db: Kysely<Database>,
  now = Math.floor(Date.now() / 1000),
): Promise<Record<AccountGauge, number>> {
  const count = async (query: Promise<{ n: number | string | bigint }>) => Number((await query).n);
  const users = db.selectFrom("users").select((eb) => eb.fn.countAll<number>().as("n"));
  const active = users.where(isActiveUser);
  const [total, activeTotal, recovery, mailcrypt, twofactor, weekly, monthly, domains, aliases, keys] =
    await Promise.all([
      count(users.executeTakeFirstOrThrow()),
      count(active.executeTakeFirstOrThrow()),
      count(active.where("recovery_secret_box", "is not", null).executeTakeFirstOrThrow()),
      count(active.where("mail_crypt", "=", 1).executeTakeFirstOrThrow()),
      count(
        active.where("totp_confirmed", "=", 1).where("totp_secret", "is not", null).executeTakeFirstOrThrow(),
      ),
      count(active.where("last_login_time", ">=", now - 7 * day).executeTakeFirstOrThrow()),
      count(active.where("last_login_time", ">=", now - 30 * day).executeTakeFirstOrThrow()),
      count(
        db
          .selectFrom("domains")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .executeTakeFirstOrThrow(),
      ),
      count(
        db
          .selectFrom("aliases")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .where("deleted", "=", 0)
          .executeTakeFirstOrThrow(),
      ),
      count(
        db
          .selectFrom("openpgp_keys")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .executeTakeFirstOrThrow(),
      ),
    ]);
  return {
    userli_users_total: total,
    userli_users_active_total: activeTotal,
    userli_users_deleted_total: total - activeTotal,
    userli_users_recovery_token_total: recovery,
    userli_users_mailcrypt_total: mailcrypt,
    userli_users_twofactor_total: twofactor,
    userli_users_weekly_active_total: weekly,
    userli_users_monthly_active_total: monthly,
    userli_domains_total: domains,
    userli_aliases_total: aliases,
    userli_openpgpkeys_total: keys,
  };
}

/** Prometheus text of the account figures alone (the console's `app:metrics`). */
export function accountFiguresText(figures: Record<AccountGauge, number>): string {
  return accountGauges
    .map(([name, help]) => `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name} ${figures[name]}\n`)
    .join("");
}

/** In-process counters and histograms of one instance, plus the account figures on each scrape. */
export class Metrics {
  readonly registry = new Registry();
  readonly requests: Counter<"method" | "route" | "status">;
  readonly requestDuration: Histogram<"method" | "route">;
  readonly signIns: Counter<"result">;
  readonly webhookDeliveries: Counter<"event" | "result">;
  readonly webhookDuration: Histogram<"event">;

  constructor(db: Kysely<Database>) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: "http_requests_total",
      help: "HTTP requests answered, by route pattern and status",
      labelNames: ["method", "route", "status"],
      registers,
    });
    this.requestDuration = new Histogram({
      name: "http_request_duration_seconds",
      help: "Time to answer HTTP requests",
      labelNames: ["method", "route"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });
    this.signIns = new Counter({
      name: "sign_ins_total",
      help: "Password sign-ins by result",
      labelNames: ["result"],
      registers,
    });
    this.webhookDeliveries = new Counter({
      name: "webhook_delivery_attempts_total",
      help: "Webhook delivery attempts by event and result (success, retry, failed)",
      labelNames: ["event", "result"],
      registers,
    });
    this.webhookDuration = new Histogram({
      name: "webhook_delivery_duration_seconds",
      help: "Time of webhook delivery attempts",
      labelNames: ["event"],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    let counted = 0;
    new Counter({
      name: "argon2_derivations_total",
      help: "Argon2 derivations started (password hashes made and verified, secret box keys)",
      registers,
      collect() {
        const now = derivationsSoFar();
        this.inc(now - counted);
        counted = now;
      },
    });
    // The usual build-info shape: constant 1, the facts in labels (joins onto any other series).
    new Gauge({
      name: "mail_account_service_build_info",
      help: "Version of the service and of the Node.js running it",
      labelNames: ["version", "node"],
      registers,
    }).set({ version: serviceVersion, node: nodeVersion }, 1);
    this.#gauges = accountGauges.map(([name, help]) => [name, new Gauge({ name, help, registers })] as const);
    this.#db = db;
  }

  readonly #gauges: (readonly [AccountGauge, Gauge])[];
  readonly #db: Kysely<Database>;

  /** The exposition text; the account figures are read from the database for each scrape. */
  async text(): Promise<string> {
    const figures = await accountFigures(this.#db);
    for (const [name, gauge] of this.#gauges) gauge.set(figures[name]);
    return this.registry.metrics();
  }
}
