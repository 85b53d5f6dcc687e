import type { FastifyInstance } from "fastify";
import type { Services } from "../../services.ts";
import { requireScope } from "../auth.ts";
import { aliasRoutes } from "./aliases.ts";
import { appPasswordRoutes } from "./app-passwords.ts";
import { auditLogRoutes } from "./audit-log.ts";
import { domainRoutes } from "./domains.ts";
import { adminValidationError, requestBodyNotObject } from "./input.ts";
import { openPgpKeyRoutes } from "./openpgp-keys.ts";
import { securityEventRoutes } from "./security-events.ts";
import { settingsRoutes } from "./settings.ts";
import { tokenRoutes } from "./tokens.ts";
import { userRoutes } from "./users.ts";
import { userImportRoutes } from "./users-import.ts";
import { webhookRoutes } from "./webhooks.ts";

/**
 * The admin API (scope `admin`, JSON in and out), one route group per resource. Each handler reads
 * its input, calls one service function and shapes the answer; the rules live in the services,
 * shared with the console and jobs. It has none of the integration API's fast path.
 * Every route declares its input and answers with TypeBox schemas: the schema checks each value's
 * type, the service its business rules (which the console relies on too).
 */
export async function adminApi(app: FastifyInstance, services: Services) {
  requireScope(app, (plain) => services.tokens.authenticate(plain), "admin");
  // A type error is worded as the services word theirs: 422 `<field>: <what>`.
  app.setSchemaErrorFormatter(adminValidationError);
  // No body (or JSON null) is an empty object, as before the schemas: a route whose fields are
  // all optional does nothing, one that needs a field names it. A binary body passes a JSON
  // schema's "object" test (a Buffer is one), so only the key upload, whose schema lists it, takes one.
  app.addHook("preValidation", (request, _reply, done) => {
    const schema = request.routeOptions.schema?.body as { content?: unknown } | undefined;
    if (schema === undefined) return done();
    if (request.body == null) request.body = {};
    else if (Buffer.isBuffer(request.body) && schema.content === undefined)
      return done(requestBodyNotObject());
    done();
  });
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
  // Reads come from the services; every change goes through the admin services (admin/), which
  // check the actor's reach and write the audit log, as the web's admin area and the console do.
  const { domains, users, aliases, settings, tokens, webhooks, openPgpKeys, admin } = services;
  await app.register(async (scope) => domainRoutes(scope, { domains, admin }));
  await app.register(async (scope) => userRoutes(scope, { users, admin }));
  await app.register(async (scope) => appPasswordRoutes(scope, { admin }));
  await app.register(async (scope) =>
    userImportRoutes(scope, { db: services.database.db, admin, passwordPolicy: services.passwordPolicy }),
  );
  await app.register(async (scope) => aliasRoutes(scope, { aliases, admin }));
  await app.register(async (scope) => settingsRoutes(scope, { settings, admin }));
  await app.register(async (scope) => tokenRoutes(scope, { tokens, admin }));
  await app.register(async (scope) => webhookRoutes(scope, { webhooks, admin }));
  await app.register(async (scope) => openPgpKeyRoutes(scope, { openPgpKeys, admin }));
  await app.register(async (scope) => auditLogRoutes(scope, { domains, admin }));
  await app.register(async (scope) => securityEventRoutes(scope, { admin }));
}
