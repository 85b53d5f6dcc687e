import type { FastifyInstance } from "fastify";
import type { Services } from "../../services.ts";
import type { TokenCheck } from "../auth.ts";
import { andThen } from "./eventually.ts";
import { MessageLookups } from "./lookups.ts";
import { writeResponsesInGroups } from "./response-groups.ts";
import { identityRoutes } from "./routes/identity.ts";
import { mailboxServerRoutes } from "./routes/mailbox-server.ts";
import { mtaRoutes } from "./routes/mta.ts";
import { retentionRoutes } from "./routes/retention.ts";
import { webmailRoutes } from "./routes/webmail.ts";
import { newWarmUpPass, type WarmUpPass, warmUpLookups } from "./warm-up.ts";

/**
 * The integration API: what Dovecot, Postfix, the webmail, the identity provider and the mailbox
 * janitor ask. Its fast path (the per-message lookups and token check answered without a promise
 * on SQLite, reads batched per turn, responses written in groups) lives in this plugin and applies
 * to its routes only; the admin API, health and well-known documents do not inherit it.
 */
export async function integrationApi(
  app: FastifyInstance,
  services: Services,
  options: { userliCompat?: boolean; warmUp?: (run: () => Promise<void>) => void } = {},
) {
  writeResponsesInGroups(app);
  const lookups = new MessageLookups(services.database, services.settings, services.tokens);
  // The warm-up's pass (warm-up.ts) goes the token check's whole way, read included, and is
  // admitted only while the warm-up runs, before the app is ready for anyone else.
  let warmUp: WarmUpPass | null = options.warmUp ? newWarmUpPass() : null;
  const tokenCheck: TokenCheck = (plain) => {
    const pass = warmUp;
    if (pass === null || plain !== pass.plain) return lookups.authenticate(plain);
    return andThen(lookups.authenticate(plain), () => pass.token);
  };
  // Handed to buildApp, which runs it once the app is ready and before it listens.
  if (warmUp)
    options.warmUp?.(async () => {
      try {
        if (warmUp) await warmUpLookups(app, services.database, services.metrics, warmUp);
      } finally {
        warmUp = null;
      }
    });
  const { database, signIn, aliases, identity, retention, lifecycle } = services;
  const groups: [
    prefix: string,
    userliPrefix: string | null,
    routes: (scope: FastifyInstance) => Promise<void>,
  ][] = [
    [
      "/api/mailbox-server",
      "/api/dovecot",
      (scope) => mailboxServerRoutes(scope, tokenCheck, { lookups, signIn, database }),
    ],
    ["/api/mta", "/api/postfix", (scope) => mtaRoutes(scope, tokenCheck, { lookups, signIn })],
    [
      "/api/webmail",
      "/api/roundcube",
      (scope) => webmailRoutes(scope, tokenCheck, { signIn, aliases, lifecycle }),
    ],
    ["/api/identity", "/api/keycloak", (scope) => identityRoutes(scope, tokenCheck, { identity, signIn })],
    ["/api/retention", null, (scope) => retentionRoutes(scope, tokenCheck, { retention })],
  ];
  for (const [prefix, userliPrefix, routes] of groups) {
    await app.register(routes, { prefix });
    // USERLI_COMPAT: userli's clients have its prefixes in their code. The same handlers, guard and
    // fast path a second time under the old prefix (not a URL rewrite), so the answers are identical.
    if (options.userliCompat && userliPrefix) await app.register(routes, { prefix: userliPrefix });
  }
}
