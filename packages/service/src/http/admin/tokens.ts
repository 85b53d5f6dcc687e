import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { AdminService } from "../../admin/service.ts";
import type { TokenService } from "../../tokens/tokens.ts";
import { actorOf } from "./actor.ts";
import { adminErrors, adminRoute, created, IdParams, NoContent, noContent, numericId } from "./input.ts";

const tag = "admin: API tokens";

const tokenExample = { id: 3, name: "postfix", scopes: ["mta"], createdAt: 1795443121, lastUsedAt: null };

/** A token as `TokenService` gives it, keys in that order: never the token itself. */
const tokenProperties = {
  id: Type.Integer(),
  name: Type.String(),
  scopes: Type.Array(Type.String({ description: "A scope name" })),
  createdAt: Type.Integer({ description: "Unix seconds" }),
  lastUsedAt: Type.Union([Type.Integer(), Type.Null()], {
    description: "Unix seconds, recorded at most every five minutes",
  }),
};

const TokenList = Type.Object(
  { items: Type.Array(Type.Object(tokenProperties)) },
  { description: "Every API token", examples: [{ items: [tokenExample] }] },
);

const CreatedToken = Type.Object(
  {
    ...tokenProperties,
    token: Type.String({ description: "The token, 64 hex characters, shown this once" }),
  },
  {
    description: "The new token",
    examples: [
      { ...tokenExample, token: "3f9a1c0e5b7d2a4e6c8b0d1f3a5c7e9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c" },
    ],
  },
);

const CreateTokenBody = Type.Object(
  {
    name: Type.String({ description: "1 to 64 characters" }),
    scopes: Type.Union([Type.Array(Type.String()), Type.String()], {
      description: "Scope names, as a list or a comma-separated string",
    }),
  },
  { examples: [{ name: "janitor", scopes: ["retention"] }] },
);

export async function tokenRoutes(
  scope: FastifyInstance,
  { tokens, admin }: { tokens: TokenService; admin: AdminService },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    "/api/admin/api-tokens",
    {
      schema: {
        ...adminRoute(tag, "List API tokens"),
        response: { 200: TokenList, ...adminErrors({}) },
      },
    },
    async () => ({ items: await tokens.list() }),
  );
  app.post(
    "/api/admin/api-tokens",
    {
      schema: {
        ...adminRoute(
          tag,
          "Create an API token",
          "The token is shown in this answer only; its SHA-256 is stored.",
        ),
        body: CreateTokenBody,
        response: {
          201: CreatedToken,
          ...adminErrors(
            {
              422: [
                "name: must be 1 to 64 characters",
                'scopes: unknown scope "root" (known: mailbox-server, mta, webmail, identity, retention, admin)',
                "scopes: must be a list or a string",
              ],
            },
            { body: true },
          ),
        },
      },
    },
    async (request, reply) => {
      const result = await admin.tokens.create(actorOf(request), request.body.name, request.body.scopes);
      return created(reply, { ...result.token, token: result.plainToken });
    },
  );
  app.delete(
    "/api/admin/api-tokens/:id",
    {
      schema: {
        ...adminRoute(tag, "Delete an API token"),
        params: IdParams,
        response: {
          204: NoContent,
          ...adminErrors({ 400: ["id: must be a number"], 404: ["API token not found"] }, { body: true }),
        },
      },
    },
    async (request, reply) => {
      await admin.tokens.delete(actorOf(request), numericId(request.params.id));
      return noContent(reply);
    },
  );
}
