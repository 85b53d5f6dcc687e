import swagger from "@fastify/swagger";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { serviceVersion } from "../version.ts";
import { type ApiTag, apiTags } from "./schemas.ts";

export const openApiPath = "/api/openapi.json";

/** userli's path prefixes (USERLI_COMPAT): the same routes as the neutral ones, not listed twice. */
const userliPrefixes = /^\/api\/(dovecot|postfix|roundcube|keycloak)(\/|$)/;

const tagDescriptions: Record<ApiTag, string> = {
  "mailbox-server": "Dovecot's userdb and passdb. Scope `mailbox-server` (userli: `dovecot`).",
  mta: "Postfix lookups and SMTP authentication. Scope `mta` (userli: `postfix`).",
  webmail:
    "The webmail's plugins: a user's aliases, and the password change (Roundcube's password plugin). " +
    "Scope `webmail` (userli: `roundcube`).",
  identity:
    "The identity provider's user storage, scoped to one managed domain. Scope `identity` (userli: `keycloak`).",
  retention: "Activity reports and the list of inactive users. Scope `retention`.",
  "admin: domains": "Managed domains. Scope `admin`.",
  "admin: users": "Users, their lifecycle (delete, restore, reset) and sign-in state. Scope `admin`.",
  "admin: aliases": "Aliases and their destinations. Scope `admin`.",
  "admin: settings": "Service-wide settings. Scope `admin`.",
  "admin: API tokens": "API tokens. Scope `admin`.",
  "admin: webhooks": "Webhook endpoints and their deliveries. Scope `admin`.",
  "admin: OpenPGP keys": "OpenPGP keys published through WKD. Scope `admin`.",
  "admin: audit log":
    "Who changed what, when and from where, through the admin API, the web's admin area or the console. Scope `admin`.",
  "admin: security events":
    "Sign-ins and changes of passwords, recovery, second factor and sessions, per account. Scope `admin`.",
  "well-known": "Public documents: WKD keys and policy, MTA-STS policy. No token.",
  health: "For load balancers and monitoring. No token.",
  metrics: "Prometheus metrics, behind `METRICS_TOKEN` (scheme `metricsToken`); absent without it.",
  openapi: "This document. No token.",
};

const description = `The integration API (what Dovecot, Postfix, a webmail, an identity provider and the mailbox
janitor call), the public endpoints and the admin API of the mail account service.

Every endpoint under \`/api/\` except this document needs an API token (scheme \`apiToken\`) whose
scopes include the scope its tag names: \`mailbox-server\`, \`mta\`, \`webmail\`, \`identity\`,
\`retention\` or \`admin\`. Errors are \`{"message": "..."}\`; the token guard's 401 also carries
\`error\`. A known path with another method answers 405 with an \`Allow\` header, before the token
check (not listed per operation).

With \`USERLI_COMPAT=true\` the integration API also answers under userli's prefixes, identically:
\`/api/dovecot/...\` = \`/api/mailbox-server/...\`, \`/api/postfix/...\` = \`/api/mta/...\`,
\`/api/roundcube/...\` = \`/api/webmail/...\`, \`/api/keycloak/...\` = \`/api/identity/...\`. Only the
neutral paths are listed here. userli's scope names \`dovecot\`, \`postfix\`, \`roundcube\` and
\`keycloak\` are accepted with or without that setting, as equivalents of \`mailbox-server\`, \`mta\`,
\`webmail\` and \`identity\`.`;

/**
 * The OpenAPI 3.1 document, generated from the route schemas, served at `/api/openapi.json`.
 * Called on the root instance before any route is added: @fastify/swagger collects routes with an
 * `onRoute` hook (and shared schemas at `onReady`); it adds no hook that runs per request.
 */
export async function openApiDocument(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Mail account service API",
        version: serviceVersion,
        description,
        license: { name: "AGPL-3.0-or-later", identifier: "AGPL-3.0-or-later" },
      },
      servers: [{ url: "/", description: "The service that serves this document" }],
      components: {
        securitySchemes: {
          apiToken: {
            type: "http",
            scheme: "bearer",
            description:
              "An API token (64 hex digits) as `Authorization: Bearer <token>`, or as `X-API-Token: <token>` " +
              "when there is no usable Authorization header. Each operation lists the scope it needs; " +
              "by tag: mailbox-server → `mailbox-server`, mta → `mta`, webmail → `webmail`, identity → " +
              "`identity`, retention → `retention`, admin: ... → `admin`.",
          },
          metricsToken: {
            type: "http",
            scheme: "bearer",
            description: "The value of `METRICS_TOKEN`, for `/metrics` only.",
          },
        },
      },
      tags: apiTags.map((name) => ({ name, description: tagDescriptions[name] })),
    },
    // Routes without tags are the ones the app adds itself (the 405 answers for other methods);
    // HEAD duplicates are left out by default.
    hideUntagged: true,
    transform: ({ schema, url }) => {
      if (userliPrefixes.test(url)) return { schema: { ...schema, hide: true }, url };
      // The integration API reads form bodies as well as JSON (clients send either); the admin API
      // is JSON (its routes say so where they read more).
      if (schema?.body && !schema.consumes && !url.startsWith("/api/admin/")) {
        return {
          schema: { ...schema, consumes: ["application/json", "application/x-www-form-urlencoded"] },
          url,
        };
      }
      return { schema, url };
    },
  });

  let document: string | undefined;
  app.get(
    openApiPath,
    {
      schema: {
        tags: ["openapi"],
        summary: "This OpenAPI document",
        response: {
          200: Type.Object(
            { openapi: Type.String(), info: Type.Object({}), paths: Type.Object({}) },
            { description: "The OpenAPI 3.1 document", additionalProperties: true },
          ),
        },
      },
    },
    // Sent as a string: made once, and the response schema above only describes it.
    async (_request, reply) => {
      document ??= JSON.stringify(app.swagger());
      return reply.type("application/json; charset=utf-8").send(document);
    },
  );
}
