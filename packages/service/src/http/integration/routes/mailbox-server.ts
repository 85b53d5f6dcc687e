import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { SignInService } from "../../../accounts/sign-in.ts";
import { type DatabaseHandle, pingDatabase } from "../../../db/database.ts";
import { requireScope, type TokenCheck } from "../../auth.ts";
import { notFoundAnswer } from "../../errors.ts";
import { requireAddress } from "../../params.ts";
import {
  bodyErrors,
  ClientAddressHeaders,
  EmailParams,
  errorBody,
  messages,
  PassdbFailureBody,
  SuccessBody,
} from "../../schemas.ts";
import { andThen } from "../eventually.ts";
import type { MessageLookups } from "../lookups.ts";
import {
  addressErrors,
  bodyFieldErrors,
  errorResponses,
  guardResponses,
  integrationRoute,
  unavailable,
} from "../route-schemas.ts";
import { originOf, refuseSignIn, throttleErrors } from "../sign-in-answers.ts";

const PasswordBody = Type.Object(
  { password: Type.String({ minLength: 1 }) },
  { examples: [{ password: "correct horse battery staple" }] },
);

const publicKeyExample =
  "LS0tLS1CRUdJTiBQVUJMSUMgS0VZLS0tLS0KTUNvd0JRWURLMlZ1QXlFQWJ4OXVaN3RmK1N6cVNHN2FFWGZ0R3c9PQotLS0tLUVORCBQVUJMSUMgS0VZLS0tLS0K";

const UserdbAnswer = Type.Object(
  {
    message: Type.Literal("success"),
    body: Type.Object(
      {
        user: Type.String({ description: "The address as stored" }),
        // An integer, not a union of 0 and 2: the serializer would test each branch on every lookup.
        mailCrypt: Type.Integer({
          description: "2 when the user's mail is encrypted with MailCrypt, else 0",
        }),
        mailCryptPublicKey: Type.String({ description: "Base64 of the PEM public key, or empty" }),
        quota: Type.String({ description: "Dovecot quota rule such as `1024M`, or empty for none" }),
      },
      { additionalProperties: false },
    ),
  },
  {
    additionalProperties: false,
    description: "The user's userdb fields",
    examples: [
      {
        message: "success",
        body: {
          user: "alice@example.org",
          mailCrypt: 2,
          mailCryptPublicKey: publicKeyExample,
          quota: "1024M",
        },
      },
      {
        message: "success",
        body: { user: "bob@example.org", mailCrypt: 0, mailCryptPublicKey: "", quota: "" },
      },
    ],
  },
);

const PassdbAnswer = Type.Object(
  {
    message: Type.Literal("success"),
    body: Type.Object(
      {
        mailCrypt: Type.Integer({
          description: "2 when the private key below is the user's, unlocked by the password, else 0",
        }),
        mailCryptPrivateKey: Type.String({ description: "Base64 of the PEM private key, or empty" }),
        mailCryptPublicKey: Type.String({ description: "Base64 of the PEM public key, or empty" }),
      },
      { additionalProperties: false },
    ),
  },
  {
    additionalProperties: false,
    description: "The password is right; the MailCrypt keys for Dovecot's mail_crypt plugin",
    examples: [
      { message: "success", body: { mailCrypt: 0, mailCryptPrivateKey: "", mailCryptPublicKey: "" } },
      {
        message: "success",
        body: {
          mailCrypt: 2,
          mailCryptPrivateKey:
            "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1DNENBUUF3QlFZREsyVnVCQ0lFSUZ6bjR3PT0KLS0tLS1FTkQgUFJJVkFURSBLRVktLS0tLQo=",
          mailCryptPublicKey: publicKeyExample,
        },
      },
    ],
  },
);

/** Dovecot's userdb and passdb (spec 4.1). Registered under /api/mailbox-server (and userli's /api/dovecot). */
export async function mailboxServerRoutes(
  scope: FastifyInstance,
  tokenCheck: TokenCheck,
  services: { lookups: MessageLookups; signIn: SignInService; database: DatabaseHandle },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  requireScope(app, tokenCheck, "mailbox-server");

  // Dovecot's adapter checks this at start: it must fail while the database does.
  app.get(
    "/status",
    {
      schema: {
        ...integrationRoute(
          "mailbox-server",
          "Is the service ready?",
          "Dovecot's adapter asks at start: success while the database answers.",
        ),
        response: { 200: SuccessBody, ...guardResponses("mailbox-server"), ...errorResponses(unavailable) },
      },
    },
    async (_request, reply) =>
      (await pingDatabase(services.database))
        ? { message: "success" as const }
        : reply.code(503).send({ message: "database unavailable, try again" }),
  );

  // Not async: sent in the same turn when the database answers at once (see eventually.ts).
  app.get(
    "/:email",
    {
      schema: {
        ...integrationRoute("mailbox-server", "userdb lookup", "An active user's userdb fields."),
        params: EmailParams,
        response: {
          200: UserdbAnswer,
          ...guardResponses("mailbox-server"),
          ...errorResponses(addressErrors, { 404: ["user not found"] }, unavailable),
        },
      },
    },
    (request, reply) =>
      andThen(services.lookups.userdb(requireAddress(request.params.email)), (body) =>
        body ? { message: "success" as const, body } : notFoundAnswer(reply, "user not found"),
      ),
  );

  app.post(
    "/:email",
    {
      schema: {
        ...integrationRoute(
          "mailbox-server",
          "passdb: check a password",
          "Checks the password of an active user and, with MailCrypt, unlocks the user's private key for this login.",
        ),
        params: EmailParams,
        body: PasswordBody,
        headers: ClientAddressHeaders,
        response: {
          200: PassdbAnswer,
          ...guardResponses("mailbox-server", {
            401: ["authentication failed"],
            403: ["user disabled due to spam role", "user password change required"],
          }),
          ...errorResponses(
            bodyErrors,
            addressErrors,
            { 404: ["user not found"] },
            bodyFieldErrors("password"),
            throttleErrors,
            unavailable,
          ),
          // The key failure carries the reason twice; any other fault is the app's plain `internal error`.
          500: Type.Union([PassdbFailureBody, errorBody("Internal error", messages.internal)], {
            description: "The MailCrypt key cannot be decrypted, or an unexpected fault",
            examples: [
              ...((PassdbFailureBody as { examples?: unknown[] }).examples ?? []),
              { message: messages.internal },
            ],
          }),
        },
      },
    },
    async (request, reply) => {
      const { email } = request.params;
      const { password } = request.body;
      requireAddress(email);
      const result = await services.signIn.signIn(email, password, {
        unlockMailCrypt: true,
        ...originOf(request, reply, "passdb"),
      });
      if (result.kind !== "ok")
        return refuseSignIn(
          reply,
          result.kind,
          {
            unknown: { status: 404, message: "user not found" },
            wrongPassword: { status: 401, message: "authentication failed" },
          },
          result.kind === "throttled" ? result.retryAfter : undefined,
        );
      const { mailCrypt, user } = result;
      if (mailCrypt.state === "failed") {
        request.log.error(
          { user: user.email, reason: mailCrypt.reason },
          "MailCrypt key could not be decrypted",
        );
        return reply.code(500).send({ message: mailCrypt.reason, error: mailCrypt.reason });
      }
      return {
        message: "success" as const,
        body: {
          mailCrypt: mailCrypt.state === "unlocked" ? 2 : 0,
          mailCryptPrivateKey: mailCrypt.state === "unlocked" ? mailCrypt.privateKey : "",
          mailCryptPublicKey: user.mailCryptPublicKey ?? "",
        },
      };
    },
  );
}
