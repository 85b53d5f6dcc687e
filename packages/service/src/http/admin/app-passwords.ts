import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { appPasswordScopes } from "../../accounts/app-passwords.ts";
import type { AdminService } from "../../admin/service.ts";
import { EmailParams } from "../schemas.ts";
import { actorOf } from "./actor.ts";
import { adminErrors, adminRoute, created, NoContent, noContent, numericId, OrNull } from "./input.ts";

const tag = "admin: users";

const Scope = Type.Enum([...appPasswordScopes], {
  description: "Where it works: `mail` (IMAP and SMTP) or `smtp` (sending only)",
});

const appPasswordExample = {
  id: 7,
  name: "Phone",
  scope: "mail",
  createdAt: 1795443121,
  lastUsedAt: 1795450321,
  lastUsedAddress: "192.0.2.10",
};

/** An app password as AppPasswordService.list gives it, keys in that order: never its value. */
const AppPasswordView = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String({ description: "The device's name, 1 to 64 characters" }),
    scope: Scope,
    createdAt: Type.Integer({ description: "Unix seconds" }),
    lastUsedAt: OrNull(
      Type.Integer({ description: "Unix seconds; written at most once an hour, so to the hour" }),
    ),
    lastUsedAddress: OrNull(Type.String({ description: "The client address of that use" })),
  },
  { description: "An app password, without its value", examples: [appPasswordExample] },
);

const AppPasswordList = Type.Object(
  { items: Type.Array(AppPasswordView) },
  { description: "The user's app passwords, oldest first", examples: [{ items: [appPasswordExample] }] },
);

const CreateBody = Type.Object(
  {
    name: Type.String({ description: "The device's name, 1 to 64 characters, no control characters" }),
    scope: Scope,
  },
  { examples: [{ name: "Printer", scope: "smtp" }] },
);

const CreatedAppPassword = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    scope: Scope,
    password: Type.String({
      description:
        "The app password, shown this once: four groups of four characters from a-z and 2-9; accepted with or without the dashes, in any case",
    }),
  },
  {
    description: "The new app password",
    examples: [{ id: 8, name: "Printer", scope: "smtp", password: "k7mp-x2qd-9fha-wn4t" }],
  },
);

const AppPasswordParams = Type.Object({
  ...EmailParams.properties,
  id: Type.String({ description: "Numeric id of the app password" }),
});

const notFound = ["user not found"];

/**
 * `/api/admin/users/{email}/app-passwords`: list, create (the value answered once) and revoke a
 * user's app passwords, audited, through AdminAppPasswords (the reach rule and the audit log).
 */
export async function appPasswordRoutes(scope: FastifyInstance, { admin }: { admin: AdminService }) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    "/api/admin/users/:email/app-passwords",
    {
      schema: {
        ...adminRoute(tag, "A user's app passwords", "Never their values."),
        params: EmailParams,
        response: { 200: AppPasswordList, ...adminErrors({ 404: notFound }) },
      },
    },
    async (request) => ({ items: await admin.appPasswords.list(actorOf(request), request.params.email) }),
  );
  app.post(
    "/api/admin/users/:email/app-passwords",
    {
      schema: {
        ...adminRoute(
          tag,
          "Create an app password for a user",
          "The value is in this answer only. For a user with MailCrypt keys only scope `smtp` can be made here (409 `app_password.needs_owner`): an app password for mail holds the private key sealed under it, which only the owner's password opens; the owner creates those on the account pages.",
        ),
        params: EmailParams,
        body: CreateBody,
        response: {
          201: CreatedAppPassword,
          ...adminErrors(
            {
              404: notFound,
              409: [
                "the mailbox is encrypted: only its owner can create an app password for mail; scope smtp works",
                "at most 50 app passwords per user; revoke one first",
              ],
              422: [
                "name: give the device a name of 1 to 64 characters",
                "scope: must be mail or smtp",
                "name: is required",
              ],
            },
            { body: true },
          ),
        },
      },
    },
    async (request, reply) => {
      const made = await admin.appPasswords.create(actorOf(request), request.params.email, request.body);
      return created(reply, { id: made.id, name: made.name, scope: made.scope, password: made.password });
    },
  );
  app.delete(
    "/api/admin/users/:email/app-passwords/:id",
    {
      schema: {
        ...adminRoute(
          tag,
          "Revoke one of a user's app passwords",
          "Ends it at once on every instance. Another user's id is not found.",
        ),
        params: AppPasswordParams,
        response: {
          204: NoContent,
          ...adminErrors(
            { 400: ["id: must be a number"], 404: [...notFound, "app password not found"] },
            { body: true },
          ),
        },
      },
    },
    async (request, reply) => {
      await admin.appPasswords.revoke(actorOf(request), request.params.email, numericId(request.params.id));
      return noContent(reply);
    },
  );
}
