import { randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { isActiveUser } from "../../accounts/queries.ts";
import type { DatabaseHandle } from "../../db/database.ts";
import { toFlag } from "../../db/schema.ts";
import type { Metrics } from "../../metrics/metrics.ts";
import type { ApiToken } from "../../tokens/tokens.ts";

/** Times each lookup is asked, for a known key and an unknown one, before the service listens. */
export const warmUpRounds = 100;

/** A key no mail server asks about: `.invalid` is reserved (RFC 2606), nothing is found for it. */
const unknownAddress = "warm-up@warm-up.invalid";

/**
 * The token the warm-up's requests present: random, made in this process, never stored, never
 * shown, accepted only while the warm-up runs (before the service listens: nobody else can send a
 * request then) and only for the lookups' scopes.
 */
export interface WarmUpPass {
  readonly plain: string;
  readonly token: ApiToken;
}

export const newWarmUpPass = (): WarmUpPass => ({
  plain: randomBytes(32).toString("hex"),
  token: Object.freeze({
    id: 0,
    name: "warm-up",
    scopes: Object.freeze(["mta", "mailbox-server"] as const),
    createdAt: 0,
    lastUsedAt: null,
  }),
});

/**
 * Warm at start (issue 30): the first seconds after a start answered lookups 10-20 times slower
 * than later (bench/README.md, "Issue 30: warm at start"), as V8 compiled the path on its first
 * calls and then optimised it, SQLite prepared the lookups' statements and read its first pages.
 * So before the service listens, each per-message lookup is asked through the whole app (routing,
 * the token check, the handler, the read, the serialiser, the grouped write) `warmUpRounds` times,
 * for an existing key (one row read here) and an unknown one. Only reads: no row is written (the
 * pass is no stored token, so no last use is recorded), no security event, no sign-in; the request
 * metrics it counted are reset before anyone can ask.
 */
export async function warmUpLookups(
  app: FastifyInstance,
  database: DatabaseHandle,
  metrics: Metrics,
  pass: WarmUpPass,
  rounds = warmUpRounds,
): Promise<void> {
  const { db } = database;
  const [user, alias, domain] = await Promise.all([
    db.selectFrom("users").select("email").where(isActiveUser).limit(1).executeTakeFirst(),
    db
      .selectFrom("aliases")
      .select("source")
      .where("deleted", "=", toFlag(false))
      .limit(1)
      .executeTakeFirst(),
    db.selectFrom("domains").select("name").limit(1).executeTakeFirst(),
  ]);
  const addresses = [user?.email, alias?.source, unknownAddress].filter((a): a is string => !!a);
  const domains = [domain?.name, "warm-up.invalid"].filter((d): d is string => !!d);
  const paths = [
    ...domains.map((d) => `/api/mta/domain/${encodeURIComponent(d)}`),
    ...addresses.flatMap((a) =>
      ["mta/mailbox", "mta/alias", "mta/senders", "mta/smtp_quota", "mailbox-server"].map(
        (route) => `/api/${route}/${encodeURIComponent(a)}`,
      ),
    ),
  ];
  const headers = { authorization: `Bearer ${pass.plain}` };
  for (let round = 0; round < rounds; round++)
    await Promise.all(paths.map((url) => app.inject({ method: "GET", url, headers })));
  // Nothing else has been answered yet (this runs before the app is ready for any request): every
  // count in the request metrics is the warm-up's own.
  await new Promise((resolve) => setImmediate(resolve));
  metrics.requests.reset();
  metrics.requestDuration.reset();
}
