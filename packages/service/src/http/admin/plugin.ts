import type { FastifyInstance } from "fastify";
import type { Services } from "../../services.ts";
import { requireScope } from "../auth.ts";
import { aliasRoutes } from "./aliases.ts";
import { domainRoutes } from "./domains.ts";
import { openPgpKeyRoutes } from "./openpgp-keys.ts";
import { settingsRoutes } from "./settings.ts";
import { tokenRoutes } from "./tokens.ts";
import { userRoutes } from "./users.ts";
import { webhookRoutes } from "./webhooks.ts";

/**
 * The admin API (scope `admin`, JSON in and out), one route group per resource. Each handler reads
 * its input, calls one service function and shapes the answer; the rules live in the services,
 * shared with the console and jobs. It has none of the integration API's fast path.
 */
export async function adminApi(app: FastifyInstance, services: Services) {
  requireScope(app, (plain) => services.tokens.authenticate(plain), "admin");
  // Binary keys (application/octet-stream, application/pgp-keys) and armored text. Registered for
  // the whole admin API, not only the key route: any other admin route answers such a body with
  // its own 422 "body: must be a JSON object" rather than a 415.
  app.addContentTypeParser(
    ["application/octet-stream", "application/pgp-keys"],
    { parseAs: "buffer" },
    (_request, payload, done) => done(null, payload),
  );
  app.addContentTypeParser("text/plain", { parseAs: "string" }, (_request, payload, done) =>
    done(null, payload),
  );
  const { domains, users, aliases, lifecycle, settings, tokens, webhooks, openPgpKeys } = services;
  await app.register(async (scope) => domainRoutes(scope, { domains, lifecycle }));
  await app.register(async (scope) => userRoutes(scope, { users, lifecycle }));
  await app.register(async (scope) => aliasRoutes(scope, { aliases, lifecycle }));
  await app.register(async (scope) => settingsRoutes(scope, { settings }));
  await app.register(async (scope) => tokenRoutes(scope, { tokens }));
  await app.register(async (scope) => webhookRoutes(scope, { webhooks }));
  await app.register(async (scope) => openPgpKeyRoutes(scope, { openPgpKeys }));
}
