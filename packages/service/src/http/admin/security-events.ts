import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { readPage } from "../../accounts/paging.ts";
import { securityEventDoors, securityEventTypes } from "../../accounts/security-events.ts";
import type { AdminService } from "../../admin/service.ts";
import { actorOf } from "./actor.ts";
import { adminErrors, adminRoute, givenText, Listing, OrNull, PageQuery, readTimeWindow } from "./input.ts";

const tag = "admin: security events";

const eventExample = {
  id: 7,
  at: 1795443121,
  type: "password.changed",
  result: "changed",
  email: "bob@example.org",
  domain: "example.org",
  door: "web",
  clientAddress: "192.0.2.10",
  actor: null,
  detail: { how: "changed" },
};

/** An event as `SecurityEventLog.list` gives it, keys in that order. */
const SecurityEvent = Type.Object(
  {
    id: Type.Integer(),
    at: Type.Integer({ description: "Unix seconds" }),
    type: Type.String({ description: `One of ${securityEventTypes.join(", ")}` }),
    result: Type.String({ description: "succeeded, failed or throttled (an attempt), changed (a change)" }),
    email: OrNull(Type.String({ description: "The account's address at the time" })),
    domain: OrNull(Type.String({ description: "The account's domain, while it exists" })),
    door: Type.String({ description: `Where it came in: ${securityEventDoors.join(", ")}` }),
    clientAddress: OrNull(Type.String({ description: "The client's address, when the door knows it" })),
    actor: OrNull(
      Type.String({
        description:
          "Who acted when not the owner: an admin's address, `console`, `api-token:<name>`, `job:<name>`",
      }),
    ),
    detail: OrNull(
      Type.Record(Type.String(), Type.Union([Type.String(), Type.Number(), Type.Boolean()]), {
        description: "The event's typed detail (a reason, a count); never a password, code, token or key",
      }),
    ),
  },
  { description: "One security event", examples: [eventExample] },
);

export async function securityEventRoutes(scope: FastifyInstance, { admin }: { admin: AdminService }) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    "/api/admin/security-events",
    {
      schema: {
        ...adminRoute(
          tag,
          "The security event log, newest first",
          "Sign-ins (succeeded, failed, throttled), second-factor failures and every change of a password, recovery, second factor or sessions, and deletions: which account, when, through which door, from which address, and who acted when it was not the owner. Kept for `security_event_days` days (setting). See docs/security.md.",
        ),
        querystring: Type.Object({
          email: Type.Optional(
            Type.String({ description: "Only this account's events (its address, exactly)" }),
          ),
          type: Type.Optional(Type.String({ description: "Only this type of event" })),
          since: Type.Optional(Type.String({ description: "Unix seconds; events at or after" })),
          until: Type.Optional(Type.String({ description: "Unix seconds; events before" })),
          limit: PageQuery.limit,
          offset: PageQuery.offset,
        }),
        response: {
          200: Listing(SecurityEvent, eventExample),
          ...adminErrors({
            422: [
              "type: unknown event type sign_in.exploded",
              "email: not an e-mail address",
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
      const email = givenText(query.email);
      const type = givenText(query.type);
      const listing = await admin.securityEvents.list(
        actorOf(request),
        {
          ...(email === undefined ? {} : { email }),
          ...(type === undefined ? {} : { type }),
          ...window,
        },
        { limit: page.limit, offset: page.offset },
      );
      return {
        items: listing.items.map((event) => ({
          id: event.id,
          at: event.at,
          type: event.type,
          result: event.result,
          email: event.email,
          domain: event.domain,
          door: event.door,
          clientAddress: event.clientAddress,
          actor: event.actor,
          detail: event.detail,
        })),
        total: listing.total,
      };
    },
  );
}
