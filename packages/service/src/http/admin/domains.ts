import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { DomainService } from "../../accounts/domains.ts";
import { readPage } from "../../accounts/paging.ts";
import type { AdminService } from "../../admin/service.ts";
import { actorOf } from "./actor.ts";
import { adminErrors, adminRoute, created, Listing, NoContent, noContent, PageQuery } from "./input.ts";

const tag = "admin: domains";

const domainExample = { id: 1, name: "example.org", createdAt: 1795443121, updatedAt: 1795443121 };

/** A domain as `DomainService` gives it, keys in that order. */
const DomainView = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String({ description: "Lower-case ASCII host name (xn-- form for international names)" }),
    createdAt: Type.Integer({ description: "Unix seconds" }),
    updatedAt: Type.Integer({ description: "Unix seconds" }),
  },
  { description: "A managed domain", examples: [domainExample] },
);

const appPasswordsRequired = Type.Boolean({
  description:
    'The default of "mail apps must use app passwords" for the domain\'s users without a choice of their own (IMAP and SMTP then refuse the account password); false unless set',
});

const DomainWithContents = Type.Object(
  {
    ...DomainView.properties,
    appPasswordsRequired,
    activeUsers: Type.Integer({ description: "Active users in the domain" }),
    activeAliases: Type.Integer({ description: "Active aliases in the domain" }),
  },
  {
    description: "The domain, its settings and what it still holds",
    examples: [{ ...domainExample, appPasswordsRequired: false, activeUsers: 2, activeAliases: 1 }],
  },
);

const DomainPatchBody = Type.Object(
  { appPasswordsRequired: Type.Optional(appPasswordsRequired) },
  { examples: [{ appPasswordsRequired: true }] },
);

const NameParams = Type.Object({
  name: Type.String({ description: "Domain name", examples: ["example.org"] }),
});

const CreateDomainBody = Type.Object(
  { name: Type.String({ description: "Domain name; ASCII, an international one in its xn-- form" }) },
  { examples: [{ name: "example.net" }] },
);

const invalidName =
  "name: not a valid domain name (ASCII letters, digits and -; an international name in its xn-- form)";

export async function domainRoutes(
  scope: FastifyInstance,
  { domains, admin }: { domains: DomainService; admin: AdminService },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  const domainWithContents = async (name: string) => {
    const domain = await domains.get(name);
    return {
      ...domain,
      appPasswordsRequired: await domains.appPasswordsRequired(domain.id),
      ...(await domains.contents(domain.id)),
    };
  };
  app.get(
    "/api/admin/domains",
    {
      schema: {
        ...adminRoute(tag, "List the managed domains"),
        querystring: Type.Object(PageQuery),
        response: {
          200: Listing(DomainView, domainExample),
          ...adminErrors({ 422: ["limit: at most 500", "offset: must be a whole number"] }),
        },
      },
    },
    async (request) => domains.list(readPage(request.query)),
  );
  app.post(
    "/api/admin/domains",
    {
      schema: {
        ...adminRoute(tag, "Add a domain"),
        body: CreateDomainBody,
        response: {
          201: DomainView,
          ...adminErrors(
            { 409: ["domain example.net already exists"], 422: [invalidName, "name: is required"] },
            { body: true },
          ),
        },
      },
    },
    async (request, reply) => created(reply, await admin.domains.create(actorOf(request), request.body.name)),
  );
  app.get(
    "/api/admin/domains/:name",
    {
      schema: {
        ...adminRoute(tag, "A domain and the counts of its active users and aliases"),
        params: NameParams,
        response: { 200: DomainWithContents, ...adminErrors({ 404: ["domain not found"] }) },
      },
    },
    async (request) => domainWithContents(request.params.name),
  );
  app.patch(
    "/api/admin/domains/:name",
    {
      schema: {
        ...adminRoute(tag, "Change a domain's settings", "What is not given stays."),
        params: NameParams,
        body: DomainPatchBody,
        response: {
          200: DomainWithContents,
          ...adminErrors(
            { 404: ["domain not found"], 422: ["appPasswordsRequired: must be true or false"] },
            { body: true },
          ),
        },
      },
    },
    async (request) => {
      const { appPasswordsRequired } = request.body;
      if (appPasswordsRequired !== undefined)
        await admin.domains.updateAppPasswordsRequired(
          actorOf(request),
          request.params.name,
          appPasswordsRequired,
        );
      return domainWithContents(request.params.name);
    },
  );
  app.delete(
    "/api/admin/domains/:name",
    {
      schema: {
        ...adminRoute(
          tag,
          "Delete a domain",
          "409 while the domain has active users or aliases, unless `force=true`: then every active user is deleted through the normal deletion (with `user.deleted` webhooks), every active alias is deleted, webhook endpoints filtered to this domain alone are disabled, and the domain is removed, in one transaction.",
        ),
        params: NameParams,
        querystring: Type.Object({
          force: Type.Optional(Type.String({ description: "`true` deletes what the domain still holds" })),
        }),
        response: {
          204: NoContent,
          ...adminErrors(
            {
              404: ["domain not found"],
              409: [
                "domain example.net still has 2 active users and 1 active aliases; delete them first or use force",
              ],
              // A repeated parameter (`?force=true&force=true`) is a list, not the string "true".
              422: ["force: must be a string"],
            },
            { body: true },
          ),
        },
      },
    },
    async (request, reply) => {
      await admin.domains.delete(actorOf(request), request.params.name, request.query.force === "true");
      return noContent(reply);
    },
  );
}
