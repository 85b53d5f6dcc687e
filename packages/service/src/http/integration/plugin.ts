import type { FastifyInstance } from "fastify";
import type { Services } from "../../services.ts";
import type { TokenCheck } from "../auth.ts";
import { MessageLookups } from "./lookups.ts";
import { writeResponsesInGroups } from "./response-groups.ts";
import { identityRoutes } from "./routes/identity.ts";
import { mailboxServerRoutes } from "./routes/mailbox-server.ts";
import { mtaRoutes } from "./routes/mta.ts";
import { retentionRoutes } from "./routes/retention.ts";
import { webmailRoutes } from "./routes/webmail.ts";

/**
 * The integration API: what Dovecot, Postfix, the webmail, the identity provider and the mailbox
 * janitor ask. Its fast path (the per-message lookups and token check answered without a promise
 * on SQLite, reads batched per turn, responses written in groups) lives in this plugin and applies
 * to its routes only; the admin API, health and well-known documents do not inherit it.
 */
export async function integrationApi(
  app: FastifyInstance,
  services: Services,
  options: { userliCompat?: boolean } = {},
) {
  writeResponsesInGroups(app);
  const lookups = new MessageLookups(services.database, services.settings, services.tokens);
  const tokenCheck: TokenCheck = (plain) => lookups.authenticate(plain);
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
