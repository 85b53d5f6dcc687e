import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { SignInService } from "../../../accounts/sign-in.ts";
import { requireScope, type TokenCheck } from "../../auth.ts";
import { notFoundAnswer } from "../../errors.ts";
import { requireAddress, requireDomain } from "../../params.ts";
import { bodyErrors, ClientAddressHeaders, DomainParams, EmailParams, SuccessBody } from "../../schemas.ts";
import { andThen } from "../eventually.ts";
import type { MessageLookups } from "../lookups.ts";
import {
  AddressList,
  addressErrors,
  bodyFieldErrors,
  domainErrors,
  errorResponses,
  guardResponses,
  integrationRoute,
  unavailable,
} from "../route-schemas.ts";
import { originOf, refuseSignIn, throttleErrors } from "../sign-in-answers.ts";

const AuthBody = Type.Object(
  {
    email: Type.String({ minLength: 1, description: "The address the client logs in with" }),
    password: Type.String({ minLength: 1 }),
  },
  { examples: [{ email: "alice@example.org", password: "correct horse battery staple" }] },
);

const Found = (description: string) => Type.Boolean({ description, examples: [true, false] });

const SmtpQuota = Type.Object(
  {
    per_hour: Type.Integer({ minimum: 0, description: "Messages per hour; 0 = unlimited" }),
    per_day: Type.Integer({ minimum: 0, description: "Messages per day; 0 = unlimited" }),
  },
  { additionalProperties: false, examples: [{ per_hour: 100, per_day: 1000 }] },
);

const lookup = { ...guardResponses("mta") };

/** Postfix lookups and SMTP authentication (spec 4.2). Registered under /api/mta (and userli's /api/postfix). */
export async function mtaRoutes(
  scope: FastifyInstance,
  tokenCheck: TokenCheck,
  services: { lookups: MessageLookups; signIn: SignInService },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  requireScope(app, tokenCheck, "mta");
  const { lookups } = services;
  // The lookups are not async functions: an answer the database gives at once is sent in the same
  // turn (see eventually.ts); Fastify sends a returned value or awaits a returned promise.

  app.get(
    "/domain/:domain",
    {
      schema: {
        ...integrationRoute("mta", "Is this domain managed here?", "Postfix `virtual_mailbox_domains`."),
        params: DomainParams,
        response: {
          200: Found("true when the domain is managed here"),
          ...lookup,
          ...errorResponses(domainErrors, unavailable),
        },
      },
    },
    (request) => lookups.isManagedDomain(requireDomain(request.params.domain)),
  );

  app.get(
    "/mailbox/:email",
    {
      schema: {
        ...integrationRoute("mta", "Is this an active user's mailbox?", "Postfix `virtual_mailbox_maps`."),
        params: EmailParams,
        response: {
          200: Found("true for an active user"),
          ...lookup,
          ...errorResponses(addressErrors, unavailable),
        },
      },
    },
    (request) => lookups.hasMailbox(requireAddress(request.params.email)),
  );

  app.get(
    "/alias/:email",
    {
      schema: {
        ...integrationRoute(
          "mta",
          "Where mail for an alias goes",
          "Postfix `virtual_alias_maps`: the destinations of the active aliases with this source (empty when none).",
        ),
        params: EmailParams,
        response: {
          200: AddressList("Destination addresses", ["alice@example.org", "bob@example.org"]),
          ...lookup,
          ...errorResponses(addressErrors, unavailable),
        },
      },
    },
    (request) => lookups.aliasDestinations(requireAddress(request.params.email)),
  );

  app.get(
    "/senders/:email",
    {
      schema: {
        ...integrationRoute(
          "mta",
          "Who may send as this address",
          "Postfix `smtpd_sender_login_maps`: the users allowed to send with this address as sender (empty when none).",
        ),
        params: EmailParams,
        response: {
          200: AddressList("Login addresses allowed to send as this address", ["alice@example.org"]),
          ...lookup,
          ...errorResponses(addressErrors, unavailable),
        },
      },
    },
    (request) => lookups.senders(requireAddress(request.params.email)),
  );

  app.get(
    "/smtp_quota/:email",
    {
      schema: {
        ...integrationRoute(
          "mta",
          "A sender's SMTP limits",
          "The limits of the active user with this address, else of the active alias; unset limits are the settings' defaults.",
        ),
        params: EmailParams,
        response: {
          200: SmtpQuota,
          ...lookup,
          ...errorResponses(addressErrors, { 404: ["user not found"] }, unavailable),
        },
      },
    },
    (request, reply) =>
      andThen(
        lookups.smtpQuota(requireAddress(request.params.email)),
        (limits) => limits ?? notFoundAnswer(reply, "user not found"),
      ),
  );

  app.post(
    "/auth",
    {
      schema: {
        ...integrationRoute("mta", "SMTP authentication", "Checks an address and password (SASL)."),
        body: AuthBody,
        headers: ClientAddressHeaders,
        response: {
          200: SuccessBody,
          ...guardResponses("mta", {
            401: ["authentication failed"],
            403: ["user disabled due to spam role", "user password change required"],
          }),
          ...errorResponses(bodyErrors, bodyFieldErrors("password", "email"), throttleErrors, unavailable),
        },
      },
    },
    async (request, reply) => {
      const { email, password } = request.body;
      const result = await services.signIn.signIn(email, password, originOf(request, reply, "mta_auth"));
      if (result.kind !== "ok") {
        const failed = { status: 401, message: "authentication failed" } as const;
        const retryAfter = result.kind === "throttled" ? result.retryAfter : undefined;
        return refuseSignIn(reply, result.kind, { unknown: failed, wrongPassword: failed }, retryAfter);
      }
      return { message: "success" as const };
    },
  );
}
