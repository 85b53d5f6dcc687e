import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { readPage } from "../../accounts/paging.ts";
import type { AdminService } from "../../admin/service.ts";
import type { WebhookService } from "../../webhooks/endpoints.ts";
import { webhookEvents } from "../../webhooks/payload.ts";
import { actorOf } from "./actor.ts";
import {
  adminErrors,
  adminRoute,
  created,
  IdParams,
  NoContent,
  noContent,
  numericId,
  OrNull,
  PageQuery,
} from "./input.ts";

const tag = "admin: webhooks";

const endpointExample = {
  id: 1,
  url: "https://hooks.example.org/mail",
  events: ["user.created", "user.deleted"],
  domains: ["example.org"],
  enabled: true,
  createdAt: 1795443121,
  updatedAt: 1795443121,
};

/** An endpoint as `WebhookService` gives it, keys in that order: never its secret. */
const endpointProperties = {
  id: Type.Integer(),
  url: Type.String(),
  events: Type.Array(Type.Enum([...webhookEvents])),
  domains: Type.Array(Type.String(), { description: "Only events of these domains; empty: all domains" }),
  enabled: Type.Boolean(),
  createdAt: Type.Integer({ description: "Unix seconds" }),
  updatedAt: Type.Integer({ description: "Unix seconds" }),
};
const Endpoint = Type.Object(endpointProperties, {
  description: "A webhook endpoint",
  examples: [endpointExample],
});

const EndpointList = Type.Object(
  { items: Type.Array(Endpoint) },
  { description: "Every webhook endpoint", examples: [{ items: [endpointExample] }] },
);

const CreatedEndpoint = Type.Object(
  {
    ...endpointProperties,
    secret: Type.String({
      description: "The signing secret, shown this once (64 random hex characters when none was given)",
    }),
  },
  {
    description: "The new endpoint",
    examples: [
      { ...endpointExample, secret: "9c1f4e7a2b5d8c0f3a6e9b2d5c8f1a4e7b0d3c6f9a2e5b8d1c4f7a0e3b6d9c2f" },
    ],
  },
);

const deliveryExample = {
  id: "01M84C02EV1BW5K0GR3YPFHCYX",
  endpointId: 1,
  type: "user.deleted",
  status: "success",
  attempts: 1,
  nextAttemptAt: null,
  responseCode: 204,
  responseBody: null,
  error: null,
  createdAt: 1795443132,
  deliveredAt: 1795443133,
  body: '{"type":"user.deleted","timestamp":"2026-11-25T10:12:12+00:00","data":{"email":"bob@example.org"}}',
};

/** A delivery as `WebhookService` gives it, keys in that order. */
const Delivery = Type.Object(
  {
    id: Type.String({ description: "ULID" }),
    endpointId: Type.Integer(),
    type: Type.String({ description: "The event" }),
    status: Type.Enum(["pending", "success", "failed"]),
    attempts: Type.Integer(),
    nextAttemptAt: OrNull(Type.Integer({ description: "Unix seconds" })),
    responseCode: OrNull(Type.Integer()),
    responseBody: OrNull(Type.String({ description: "The start of the receiver's answer" })),
    error: OrNull(Type.String()),
    createdAt: Type.Integer({ description: "Unix seconds" }),
    deliveredAt: OrNull(Type.Integer({ description: "Unix seconds" })),
    body: Type.String({ description: "The JSON sent, byte for byte" }),
  },
  { description: "A delivery", examples: [deliveryExample] },
);

const DeliveryList = Type.Object(
  { items: Type.Array(Delivery), total: Type.Integer() },
  { description: "Deliveries, newest first", examples: [{ items: [deliveryExample], total: 1 }] },
);

const url = Type.String({ description: "http or https, at most 2048 characters" });
const events = Type.Array(Type.String(), { description: `At least one of ${webhookEvents.join(", ")}` });
const secret = Type.String({ description: "16 to 255 characters" });
const domains = Type.Array(Type.String(), { description: "Managed domain names; empty: all domains" });
const enabled = Type.Boolean({ description: "Default true" });

const CreateEndpointBody = Type.Object(
  {
    url,
    events,
    secret: Type.Optional(OrNull(secret)),
    domains: Type.Optional(OrNull(domains)),
    enabled: Type.Optional(enabled),
  },
  { examples: [{ url: "https://hooks.example.org/mail", events: ["user.deleted"] }] },
);

const EndpointPatchBody = Type.Object(
  {
    url: Type.Optional(url),
    events: Type.Optional(events),
    secret: Type.Optional(secret),
    domains: Type.Optional(OrNull(domains)),
    enabled: Type.Optional(enabled),
  },
  { examples: [{ enabled: false, domains: ["example.org"] }] },
);

const notFound = ["webhook not found"];
const endpointErrors = [
  "url: must be an http(s) URL",
  `events: must list at least one of ${webhookEvents.join(", ")}`,
  `events: unknown event user.exploded (known: ${webhookEvents.join(", ")})`,
  "secret: must be 16 to 255 characters",
  "domains: nowhere.net is not a managed domain",
  "enabled: must be true or false",
];

export async function webhookRoutes(
  scope: FastifyInstance,
  { webhooks, admin }: { webhooks: WebhookService; admin: AdminService },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    "/api/admin/webhooks",
    {
      schema: {
        ...adminRoute(tag, "List webhook endpoints"),
        response: { 200: EndpointList, ...adminErrors({}) },
      },
    },
    async () => ({ items: await webhooks.list() }),
  );
  app.post(
    "/api/admin/webhooks",
    {
      schema: {
        ...adminRoute(tag, "Add a webhook endpoint"),
        body: CreateEndpointBody,
        response: { 201: CreatedEndpoint, ...adminErrors({ 422: endpointErrors }, { body: true }) },
      },
    },
    async (request, reply) => {
      const result = await admin.webhooks.create(actorOf(request), request.body);
      return created(reply, { ...result.endpoint, secret: result.secret });
    },
  );
  app.get(
    "/api/admin/webhooks/:id",
    {
      schema: {
        ...adminRoute(tag, "A webhook endpoint"),
        params: IdParams,
        response: { 200: Endpoint, ...adminErrors({ 400: ["id: must be a number"], 404: notFound }) },
      },
    },
    async (request) => webhooks.get(numericId(request.params.id)),
  );
  app.patch(
    "/api/admin/webhooks/:id",
    {
      schema: {
        ...adminRoute(tag, "Change a webhook endpoint", "`domains` replaces the list."),
        params: IdParams,
        body: EndpointPatchBody,
        response: {
          200: Endpoint,
          ...adminErrors(
            { 400: ["id: must be a number"], 404: notFound, 422: endpointErrors },
            { body: true },
          ),
        },
      },
    },
    async (request) => admin.webhooks.update(actorOf(request), numericId(request.params.id), request.body),
  );
  app.delete(
    "/api/admin/webhooks/:id",
    {
      schema: {
        ...adminRoute(tag, "Delete a webhook endpoint", "Its delivery history goes with it."),
        params: IdParams,
        response: {
          204: NoContent,
          ...adminErrors({ 400: ["id: must be a number"], 404: notFound }, { body: true }),
        },
      },
    },
    async (request, reply) => {
      await admin.webhooks.delete(actorOf(request), numericId(request.params.id));
      return noContent(reply);
    },
  );
  app.get(
    "/api/admin/webhooks/:id/deliveries",
    {
      schema: {
        ...adminRoute(tag, "An endpoint's deliveries, newest first"),
        params: IdParams,
        querystring: Type.Object({
          status: Type.Optional(Type.Enum(["success", "failed", "pending"], { description: "Only these" })),
          type: Type.Optional(
            Type.Enum([...webhookEvents], { description: "Only deliveries of this event" }),
          ),
          limit: PageQuery.limit,
          offset: PageQuery.offset,
        }),
        response: {
          200: DeliveryList,
          ...adminErrors({
            400: ["id: must be a number"],
            404: notFound,
            422: ["status: must be success, failed or pending", "limit: at most 500"],
          }),
        },
      },
    },
    async (request) => {
      const page = readPage(request.query);
      return webhooks.deliveries(numericId(request.params.id), {
        status: request.query.status,
        type: request.query.type,
        limit: page.limit,
        offset: page.offset,
      });
    },
  );
  app.post(
    "/api/admin/webhook-deliveries/:id/retry",
    {
      schema: {
        ...adminRoute(
          tag,
          "Queue a failed delivery again",
          "The same bytes and signature are sent. Not while its endpoint is disabled.",
        ),
        params: Type.Object({ id: Type.String({ description: "The delivery's ULID" }) }),
        response: {
          200: Delivery,
          ...adminErrors(
            {
              404: ["delivery not found"],
              409: [
                "delivery is pending; only failed deliveries can be retried",
                "webhook endpoint 1 is disabled; enable it before retrying its deliveries",
              ],
            },
            { body: true },
          ),
        },
      },
    },
    async (request) => admin.webhooks.retry(actorOf(request), request.params.id),
  );
}
