import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { AliasService } from "../../accounts/aliases.ts";
import { readPage } from "../../accounts/paging.ts";
import type { AdminService } from "../../admin/service.ts";
import { actorOf } from "./actor.ts";
import {
  adminErrors,
  adminRoute,
  created,
  givenText,
  Listing,
  NoContent,
  noContent,
  OrNull,
  PageQuery,
  SmtpQuotaInput,
} from "./input.ts";

const tag = "admin: aliases";

const aliasExample = {
  source: "team@example.org",
  domain: "example.org",
  destinations: ["alice@example.org", "bob@example.org"],
  owner: "alice@example.org",
  smtpQuota: { per_hour: 3, per_day: null },
  createdAt: 1795443121,
  updatedAt: 1795443121,
  deleted: false,
};

/** An alias as `AliasService` shows it, keys in that order. */
const AliasView = Type.Object(
  {
    source: Type.String(),
    domain: Type.String(),
    destinations: Type.Array(Type.String(), { description: "Empty once deleted" }),
    owner: OrNull(Type.String({ description: "The owning user's address" })),
    smtpQuota: Type.Object(
      { per_hour: OrNull(Type.Integer()), per_day: OrNull(Type.Integer()) },
      { description: "SMTP limits; null means the setting's default" },
    ),
    createdAt: Type.Integer({ description: "Unix seconds" }),
    updatedAt: Type.Integer({ description: "Unix seconds" }),
    deleted: Type.Boolean(),
  },
  { description: "An alias", examples: [aliasExample] },
);

const SourceParams = Type.Object({
  source: Type.String({ description: "The alias address", examples: ["team@example.org"] }),
});

const Destinations = Type.Array(Type.String(), {
  description: "Addresses the alias forwards to, at most 100",
});

const CreateAliasBody = Type.Object(
  {
    source: Type.String({ description: "A new address in a managed domain" }),
    destinations: Type.Optional(Destinations),
    owner: Type.Optional(
      OrNull(Type.String({ description: "An active user; without destinations the alias forwards to it" })),
    ),
    smtpQuota: Type.Optional(OrNull(SmtpQuotaInput)),
  },
  {
    examples: [
      { source: "team@example.org", destinations: ["alice@example.org", "bob@example.org"] },
      { source: "bobby@example.org", owner: "bob@example.org" },
    ],
  },
);

const AliasPatchBody = Type.Object(
  {
    destinations: Type.Optional(Destinations),
    owner: Type.Optional(OrNull(Type.String({ description: "An active user; null removes the owner" }))),
    smtpQuota: Type.Optional(OrNull(SmtpQuotaInput)),
  },
  { examples: [{ destinations: ["bob@example.org"], smtpQuota: null }] },
);

const notFound = ["alias not found"];
const destinationErrors = [
  "destinations: bad is not a valid address",
  "destinations: at most 100 addresses",
  "owner: no active user with this address",
];

export async function aliasRoutes(
  scope: FastifyInstance,
  { aliases, admin }: { aliases: AliasService; admin: AdminService },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    "/api/admin/aliases",
    {
      schema: {
        ...adminRoute(tag, "List aliases, deleted ones included"),
        querystring: Type.Object({
          ...PageQuery,
          domain: Type.Optional(Type.String({ description: "Only aliases of this domain" })),
          owner: Type.Optional(Type.String({ description: "Only aliases this user owns" })),
        }),
        response: {
          200: Listing(AliasView, aliasExample),
          ...adminErrors({ 422: ["limit: at most 500", "offset: must be a whole number"] }),
        },
      },
    },
    async (request) =>
      aliases.list(readPage(request.query), {
        domain: givenText(request.query.domain),
        owner: givenText(request.query.owner),
      }),
  );
  app.post(
    "/api/admin/aliases",
    {
      schema: {
        ...adminRoute(tag, "Create an alias", "An owner without destinations means `[owner]`."),
        body: CreateAliasBody,
        response: {
          201: AliasView,
          ...adminErrors(
            {
              409: ["address team@example.org is already taken"],
              422: [
                "destinations: at least one destination or an owner is required",
                "source: domain example.net is not managed here",
                ...destinationErrors,
                "source: is required",
              ],
            },
            { body: true },
          ),
        },
      },
    },
    async (request, reply) => {
      const input = request.body;
      const alias = await admin.aliases.create(actorOf(request), {
        source: input.source,
        destinations: input.destinations,
        owner: input.owner ?? null,
        smtpQuota: input.smtpQuota,
      });
      return created(reply, alias);
    },
  );
  app.get(
    "/api/admin/aliases/:source",
    {
      schema: {
        ...adminRoute(tag, "An alias, also when deleted"),
        params: SourceParams,
        response: { 200: AliasView, ...adminErrors({ 404: notFound }) },
      },
    },
    async (request) => aliases.get(request.params.source),
  );
  app.patch(
    "/api/admin/aliases/:source",
    {
      schema: {
        ...adminRoute(tag, "Change an alias's destinations, owner or SMTP limits"),
        params: SourceParams,
        body: AliasPatchBody,
        response: {
          200: AliasView,
          ...adminErrors(
            {
              404: notFound,
              422: ["destinations: at least one destination is required", ...destinationErrors],
            },
            { body: true },
          ),
        },
      },
    },
    async (request) => admin.aliases.update(actorOf(request), request.params.source, request.body),
  );
  app.delete(
    "/api/admin/aliases/:source",
    {
      schema: {
        ...adminRoute(tag, "Delete an alias", "Soft delete: the address stays taken."),
        params: SourceParams,
        response: { 204: NoContent, ...adminErrors({ 404: notFound }, { body: true }) },
      },
    },
    async (request, reply) => {
      await admin.aliases.delete(actorOf(request), request.params.source);
      return noContent(reply);
    },
  );
}
