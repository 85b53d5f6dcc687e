import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { auditActions } from "../../accounts/audit-log.ts";
import type { DomainService } from "../../accounts/domains.ts";
import { readPage, readSearch } from "../../accounts/paging.ts";
import type { AdminService } from "../../admin/service.ts";
import { actorOf } from "./actor.ts";
import { adminErrors, adminRoute, givenText, Listing, OrNull, PageQuery, readTimeWindow } from "./input.ts";

const tag = "admin: audit log";

const entryExample = {
  id: 42,
  at: 1795443121,
  actor: "alice@example.org",
  action: "user.update",
  target: "bob@example.org",
  domain: "example.org",
  detail: { quota: { from: 1024, to: 2048 } },
  clientAddress: "192.0.2.10",
};

/** An entry as `AuditLog.list` gives it, keys in that order. */
const AuditEntry = Type.Object(
  {
    id: Type.Integer(),
    at: Type.Integer({ description: "Unix seconds" }),
    actor: Type.String({ description: "A user's address, `console` or `api-token:<name>`" }),
    action: Type.String({ description: `One of ${auditActions.join(", ")}` }),
    target: OrNull(
      Type.String({ description: "The address, domain, `api-token:<name>`, `webhook:<id>` or job" }),
    ),
    domain: OrNull(Type.String({ description: "The target's domain, while it exists" })),
    detail: OrNull(
      Type.Record(Type.String(), Type.Unknown(), {
        description: "The changed fields (`{from, to}` each); never a password, secret, token or key",
      }),
    ),
    clientAddress: OrNull(Type.String({ description: "Where the request came from; null for the console" })),
  },
  { description: "One admin action", examples: [entryExample] },
);

export async function auditLogRoutes(
  scope: FastifyInstance,
  { domains, admin }: { domains: DomainService; admin: AdminService },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    "/api/admin/audit-log",
    {
      schema: {
        ...adminRoute(
          tag,
          "The audit log of admin actions, newest first",
          "Every change made through the admin API, the web's admin area and the console: who, what, when, from which address, and the changed fields.",
        ),
        querystring: Type.Object({
          actor: Type.Optional(Type.String({ description: "Only this actor (exact)" })),
          action: Type.Optional(Type.String({ description: "Only this action" })),
          target: Type.Optional(Type.String({ description: "Targets containing this text" })),
          domain: Type.Optional(Type.String({ description: "Only entries about this domain" })),
          since: Type.Optional(Type.String({ description: "Unix seconds; entries at or after" })),
          until: Type.Optional(Type.String({ description: "Unix seconds; entries before" })),
          limit: PageQuery.limit,
          offset: PageQuery.offset,
        }),
        response: {
          200: Listing(AuditEntry, entryExample),
          ...adminErrors({
            422: [
              "action: unknown action user.exploded",
              "since: must be a whole number",
              "limit: at most 500",
            ],
          }),
        },
      },
    },
    async (request) => {
      const query = request.query;
      const page = readPage({ limit: query.limit, offset: query.offset });
      const window = readTimeWindow(query);
      const domainName = givenText(query.domain);
      let domainId: number | undefined;
      if (domainName !== undefined) {
        const domain = await domains.find(domainName);
        // An unknown domain has no entries (as the other lists filter by an unknown domain).
        if (!domain) return { items: [], total: 0 };
        domainId = domain.id;
      }
      const listing = await admin.auditLog.list(
        actorOf(request),
        {
          actor: givenText(query.actor),
          action: givenText(query.action),
          target: givenText(readSearch(query.target)),
          ...(domainId === undefined ? {} : { domainId }),
          ...window,
        },
        { limit: page.limit, offset: page.offset },
      );
      return {
        items: listing.items.map((entry) => ({
          id: entry.id,
          at: entry.at,
          actor: entry.actor,
          action: entry.action,
          target: entry.target,
          domain: entry.domain,
          detail: entry.detail,
          clientAddress: entry.clientAddress,
        })),
        total: listing.total,
      };
    },
  );
}
