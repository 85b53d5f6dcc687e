import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { readPage } from "../../accounts/paging.ts";
import { knownRoles } from "../../accounts/roles.ts";
import { toUserView, type UserService } from "../../accounts/users.ts";
import type { AdminService } from "../../admin/service.ts";
import { EmailParams } from "../schemas.ts";
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

const tag = "admin: users";

const userExample = {
  email: "bob@example.net",
  domain: "example.net",
  roles: ["ROLE_USER", "ROLE_PERMANENT"],
  mailCrypt: true,
  hasMailCryptKeys: true,
  hasRecoveryToken: true,
  quota: 1024,
  smtpQuota: { per_hour: 100, per_day: 1000 },
  passwordChangeRequired: false,
  totpEnabled: false,
  appPasswordsRequired: null,
  lastLoginTime: null,
  createdAt: 1795443121,
  updatedAt: 1795443121,
  deleted: false,
};

const Role = Type.Enum([...knownRoles], { description: "A role name" });

const SmtpQuotaView = Type.Object(
  { per_hour: OrNull(Type.Integer()), per_day: OrNull(Type.Integer()) },
  { description: "SMTP limits; null means the setting's default" },
);

/** A user as `toUserView` gives it, keys in that order: never a hash, key or secret. */
const userViewProperties = {
  email: Type.String(),
  domain: Type.String(),
  roles: Type.Array(Role),
  mailCrypt: Type.Boolean(),
  hasMailCryptKeys: Type.Boolean(),
  hasRecoveryToken: Type.Boolean(),
  quota: OrNull(Type.Integer({ description: "MiB" })),
  smtpQuota: SmtpQuotaView,
  passwordChangeRequired: Type.Boolean(),
  totpEnabled: Type.Boolean(),
  appPasswordsRequired: OrNull(
    Type.Boolean({
      description:
        "Mail apps must use app passwords (IMAP and SMTP refuse the account password); null follows the domain's default",
    }),
  ),
  lastLoginTime: OrNull(Type.Integer({ description: "Unix seconds" })),
  createdAt: Type.Integer({ description: "Unix seconds" }),
  updatedAt: Type.Integer({ description: "Unix seconds" }),
  deleted: Type.Boolean(),
};
const UserView = Type.Object(userViewProperties, { description: "A user", examples: [userExample] });

const recoveryTokenExample = "0b3e8a52-5a0c-4d5e-9d2f-6f1a7c2e4b90";

const CreatedUser = Type.Object(
  {
    ...userViewProperties,
    recoveryToken: Type.Optional(
      Type.String({ description: "The MailCrypt recovery token, shown this once; only when keys were made" }),
    ),
  },
  { description: "The new user", examples: [{ ...userExample, recoveryToken: recoveryTokenExample }] },
);

const CreateUserBody = Type.Object(
  {
    email: Type.String({ description: "A new address in a managed domain" }),
    password: Type.String({ description: "At least 12 characters, at most 4096 bytes" }),
    roles: Type.Optional(Type.Array(Type.String(), { description: "Role names; ROLE_USER is always added" })),
    mailCrypt: Type.Optional(
      Type.Boolean({ description: "Make a MailCrypt key pair; default from the setting mail_crypt" }),
    ),
    quota: Type.Optional(OrNull(Type.Integer({ description: "MiB, 0 or more" }))),
    passwordChangeRequired: Type.Optional(Type.Boolean({ description: "Default false" })),
    smtpQuota: Type.Optional(OrNull(SmtpQuotaInput)),
  },
  {
    examples: [
      {
        email: "bob@example.net",
        password: "correct horse battery staple",
        roles: ["ROLE_PERMANENT"],
        quota: 1024,
        smtpQuota: { per_hour: 100, per_day: 1000 },
      },
    ],
  },
);

const UserPatchBody = Type.Object(
  {
    roles: Type.Optional(
      Type.Array(Type.String(), { description: "Replaces the roles; ROLE_USER is always added" }),
    ),
    quota: Type.Optional(OrNull(Type.Integer({ description: "MiB, 0 or more" }))),
    passwordChangeRequired: Type.Optional(Type.Boolean()),
    smtpQuota: Type.Optional(OrNull(SmtpQuotaInput)),
    mailCrypt: Type.Optional(Type.Boolean({ description: "true needs existing keys" })),
    lastLoginTime: Type.Optional(OrNull(Type.Integer({ description: "Unix seconds, not in the future" }))),
    appPasswordsRequired: Type.Optional(
      OrNull(
        Type.Boolean({
          description: "Mail apps must use app passwords: true or false, or null for the domain's default",
        }),
      ),
    ),
  },
  { examples: [{ quota: 2048, passwordChangeRequired: true }, { appPasswordsRequired: true }] },
);

const PasswordBody = Type.Object(
  { password: Type.String({ description: "The new password: at least 12 characters, at most 4096 bytes" }) },
  { examples: [{ password: "a brand new password 42" }] },
);

const NewCredentials = Type.Object(
  {
    recoveryToken: OrNull(
      Type.String({ description: "The new MailCrypt recovery token, shown this once; null without keys" }),
    ),
  },
  {
    description: "The new credentials",
    examples: [{ recoveryToken: recoveryTokenExample }, { recoveryToken: null }],
  },
);

const TotpBody = Type.Object(
  {
    secret: Type.Optional(
      OrNull(Type.String({ description: "Base32, at least 16 characters; generated when absent" })),
    ),
    backupCodes: Type.Optional(
      OrNull(Type.Array(Type.String(), { description: "Up to 20 six-digit codes; 6 generated when absent" })),
    ),
  },
  { examples: [{}, { secret: "JBSWY3DPEHPK3PXP", backupCodes: ["123456"] }] },
);

const TotpAnswer = Type.Object(
  { secret: Type.String(), backupCodes: Type.Array(Type.String()) },
  {
    description: "TOTP is on; the plain backup codes are shown this once",
    examples: [
      {
        secret: "MFRGGZDFMZTWQ2LKNNWG23TPOBYXE43UOV3HO6DZPIYTEMZUGU3A",
        backupCodes: ["402183", "918274", "117730", "660419", "283915", "745102"],
      },
    ],
  },
);

const notFound = ["user not found"];
const passwordRules = [
  "password: must be at least 12 characters",
  "password: must not be blank",
  "password: must be at most 4096 bytes",
  "password: is required",
  "password: must be a string",
];

export async function userRoutes(
  scope: FastifyInstance,
  { users, admin }: { users: UserService; admin: AdminService },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    "/api/admin/users",
    {
      schema: {
        ...adminRoute(tag, "List users"),
        querystring: Type.Object({
          ...PageQuery,
          domain: Type.Optional(Type.String({ description: "Only users of this domain" })),
          status: Type.Optional(
            Type.Enum(["active", "deleted", "all"], { description: "Which users; default active" }),
          ),
        }),
        response: {
          200: Listing(UserView, userExample),
          ...adminErrors({ 422: ["status: must be active, deleted or all", "limit: at most 500"] }),
        },
      },
    },
    async (request) =>
      users.list(readPage(request.query), {
        domain: givenText(request.query.domain),
        status: request.query.status ?? "active",
      }),
  );
  app.post(
    "/api/admin/users",
    {
      schema: {
        ...adminRoute(tag, "Create a user", "Fires `user.created`."),
        body: CreateUserBody,
        response: {
          201: CreatedUser,
          ...adminErrors(
            {
              409: ["address bob@example.net is already taken"],
              422: [
                "email: domain example.net is not managed here",
                ...passwordRules,
                "roles: unknown role ROLE_KING",
                "quota: must be a whole number of MiB, 0 or more",
                "passwordChangeRequired: must be true or false",
                "smtpQuota.per_hour: must be a whole number or null",
              ],
            },
            { body: true },
          ),
        },
      },
    },
    async (request, reply) => {
      const input = request.body;
      const result = await admin.users.create(actorOf(request), {
        email: input.email,
        password: input.password,
        roles: input.roles,
        mailCrypt: input.mailCrypt,
        quota: input.quota,
        passwordChangeRequired: input.passwordChangeRequired,
        smtpQuota: input.smtpQuota,
      });
      const view = toUserView(result.user);
      return created(reply, result.recoveryToken ? { ...view, recoveryToken: result.recoveryToken } : view);
    },
  );
  app.get(
    "/api/admin/users/:email",
    {
      schema: {
        ...adminRoute(tag, "A user, deleted ones included"),
        params: EmailParams,
        response: { 200: UserView, ...adminErrors({ 404: notFound }) },
      },
    },
    async (request) => toUserView(await users.get(request.params.email)),
  );
  app.patch(
    "/api/admin/users/:email",
    {
      schema: {
        ...adminRoute(tag, "Change a user", "All fields are checked before anything is written."),
        params: EmailParams,
        body: UserPatchBody,
        response: {
          200: UserView,
          ...adminErrors(
            {
              404: notFound,
              422: [
                "mailCrypt: the user has no MailCrypt keys; reset the user to create them",
                "lastLoginTime: must be Unix seconds, not in the future, or null",
                "roles: must be a list",
                "appPasswordsRequired: must be true or false, or null",
              ],
            },
            { body: true },
          ),
        },
      },
    },
    async (request) =>
      toUserView(await admin.users.update(actorOf(request), request.params.email, request.body)),
  );
  app.delete(
    "/api/admin/users/:email",
    {
      schema: {
        ...adminRoute(
          tag,
          "Delete a user",
          "Soft delete; fires `user.deleted`. The address is never reused.",
        ),
        params: EmailParams,
        response: { 204: NoContent, ...adminErrors({ 404: notFound }, { body: true }) },
      },
    },
    async (request, reply) => {
      await admin.users.delete(actorOf(request), request.params.email);
      return noContent(reply);
    },
  );
  app.post(
    "/api/admin/users/:email/reset",
    {
      schema: {
        ...adminRoute(tag, "Reset a user: new password, new keys, TOTP off", "Fires `user.reset`."),
        params: EmailParams,
        body: PasswordBody,
        response: {
          200: NewCredentials,
          ...adminErrors({ 404: notFound, 422: passwordRules }, { body: true }),
        },
      },
    },
    async (request) => admin.users.reset(actorOf(request), request.params.email, request.body.password),
  );
  app.post(
    "/api/admin/users/:email/restore",
    {
      schema: {
        ...adminRoute(tag, "Restore a deleted user with a new password"),
        params: EmailParams,
        body: PasswordBody,
        response: {
          200: NewCredentials,
          ...adminErrors(
            { 404: notFound, 409: ["user is active; reset it instead"], 422: passwordRules },
            { body: true },
          ),
        },
      },
    },
    async (request) => admin.users.restore(actorOf(request), request.params.email, request.body.password),
  );
  app.put(
    "/api/admin/users/:email/totp",
    {
      schema: {
        ...adminRoute(tag, "Switch TOTP on", "What is not given is generated."),
        params: EmailParams,
        body: TotpBody,
        response: {
          200: TotpAnswer,
          ...adminErrors(
            {
              404: notFound,
              422: [
                "secret: must be a base32 string of at least 16 characters",
                "backupCodes: must be a list of up to 20 six-digit codes",
              ],
            },
            { body: true },
          ),
        },
      },
    },
    async (request) => admin.users.enableTotp(actorOf(request), request.params.email, request.body),
  );
  app.delete(
    "/api/admin/users/:email/totp",
    {
      schema: {
        ...adminRoute(tag, "Switch two-factor authentication off (TOTP and passkeys)"),
        params: EmailParams,
        response: { 204: NoContent, ...adminErrors({ 404: notFound }, { body: true }) },
      },
    },
    async (request, reply) => {
      await admin.users.disableTotp(actorOf(request), request.params.email);
      return noContent(reply);
    },
  );
}
