import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { type IdentityService, identityUser } from "../../../accounts/identity.ts";
import { readSearch } from "../../../accounts/paging.ts";
import type { SignInService } from "../../../accounts/sign-in.ts";
import { requireScope, type TokenCheck } from "../../auth.ts";
import { queryInteger, requireDomain } from "../../params.ts";
import { bodyErrors, ClientAddressHeaders, DomainParams, SuccessBody } from "../../schemas.ts";
import {
  bodyFieldErrors,
  domainErrors,
  errorResponses,
  guardResponses,
  integrationRoute,
  unavailable,
} from "../route-schemas.ts";
import { originOf, throttledMessage, throttleErrors } from "../sign-in-answers.ts";

const ValidateBody = Type.Object(
  {
    credentialType: Type.Optional(
      Type.String({ description: "`password` (default) or `otp` (a TOTP or backup code)" }),
    ),
    password: Type.String({ minLength: 1, description: "The password, or the code for `otp`" }),
  },
  { examples: [{ password: "correct horse battery staple" }, { credentialType: "otp", password: "123456" }] },
);

/**
 * Documents the query; the handler reads it itself (`attachValidation`), so that a value that is
 * not a whole number, or a repeated one, is 400 as on the rest of the integration API.
 */
const SearchQuery = Type.Object({
  search: Type.Optional(
    Type.String({ description: "Part of the address, case-insensitive", examples: ["ali"] }),
  ),
  max: Type.Optional(
    Type.String({
      pattern: "^-?\\d+$",
      description: "Page size, default 10; larger than 500 means 500, negative the default",
      examples: ["10"],
    }),
  ),
  first: Type.Optional(
    Type.String({ pattern: "^-?\\d+$", description: "Offset, default 0", examples: ["0"] }),
  ),
});

const UserParams = Type.Object({
  domain: DomainParams.properties.domain,
  email: Type.String({
    description: "Full address, or the local part (completed with the domain)",
    examples: ["alice"],
  }),
});

const ConfiguredParams = Type.Object({
  domain: DomainParams.properties.domain,
  credentialType: Type.String({ description: "`password` or `otp`", examples: ["otp"] }),
  email: UserParams.properties.email,
});

const ValidateParams = Type.Object({
  domain: DomainParams.properties.domain,
  email: Type.String({ description: "Full address", examples: ["alice@example.org"] }),
});

const IdentityUser = Type.Object(
  {
    id: Type.String({ description: "The local part" }),
    email: Type.String(),
  },
  { additionalProperties: false, examples: [{ id: "alice", email: "alice@example.org" }] },
);

const domainNotFound = { 404: ["domain not found"] } as const;
const tokens = guardResponses("identity");

/** The identity provider's user storage (spec 4.4); every answer is scoped to one managed domain. Registered under /api/identity (and userli's /api/keycloak). */
export async function identityRoutes(
  scope: FastifyInstance,
  tokenCheck: TokenCheck,
  services: { identity: IdentityService; signIn: SignInService },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  requireScope(app, tokenCheck, "identity");
  const { identity } = services;

  app.get(
    "/:domain",
    {
      attachValidation: true,
      schema: {
        ...integrationRoute(
          "identity",
          "Search the domain's users",
          "Active users of the domain whose address contains `search`, ordered by address.",
        ),
        params: DomainParams,
        querystring: SearchQuery,
        response: {
          200: Type.Array(IdentityUser, {
            description: "The page of users",
            examples: [
              [
                { id: "alice", email: "alice@example.org" },
                { id: "bob", email: "bob@example.org" },
              ],
            ],
          }),
          ...tokens,
          ...errorResponses(
            domainErrors,
            { 400: ["max: must be a whole number", "first: must be a whole number"] },
            domainNotFound,
            unavailable,
          ),
        },
      },
    },
    async (request) => {
      // Read as unknown: with attachValidation a value may be a list (`?max=1&max=2`).
      const query = request.query as Record<string, unknown>;
      const domainId = await identity.domainId(requireDomain(request.params.domain));
      const search = readSearch(query.search);
      const max = queryInteger(query.max, "max", 10, 500);
      const first = queryInteger(query.first, "first", 0, Number.MAX_SAFE_INTEGER);
      return identity.search(domainId, search, max, first);
    },
  );

  app.get(
    "/:domain/count",
    {
      schema: {
        ...integrationRoute(
          "identity",
          "Count the domain's users",
          "The number of active users of the domain.",
        ),
        params: DomainParams,
        response: {
          200: Type.Integer({ minimum: 0, description: "Number of active users", examples: [42] }),
          ...tokens,
          ...errorResponses(domainErrors, domainNotFound, unavailable),
        },
      },
    },
    async (request) => identity.count(await identity.domainId(requireDomain(request.params.domain))),
  );

  app.get(
    "/:domain/user/:email",
    {
      schema: {
        ...integrationRoute("identity", "One user of the domain", "An active user of the domain."),
        params: UserParams,
        response: {
          200: IdentityUser,
          ...tokens,
          ...errorResponses(domainErrors, { 404: ["domain not found", "user not found"] }, unavailable),
        },
      },
    },
    async (request) => {
      const { domain, email } = request.params;
      const name = requireDomain(domain);
      const user = await identity.user(await identity.domainId(name), name, email);
      return identityUser(user.email);
    },
  );

  app.post(
    "/:domain/validate/:email",
    {
      schema: {
        ...integrationRoute(
          "identity",
          "Check a password or second factor",
          "A backup code is used up when it succeeds. Unknown, deleted and spam users get `authentication failed`.",
        ),
        params: ValidateParams,
        body: ValidateBody,
        headers: ClientAddressHeaders,
        response: {
          200: SuccessBody,
          ...guardResponses("identity", {
            403: ["authentication failed", "password change required", "not supported"],
          }),
          ...errorResponses(
            bodyErrors,
            domainErrors,
            { 400: ["not supported"] },
            domainNotFound,
            bodyFieldErrors("password"),
            throttleErrors,
            unavailable,
          ),
        },
      },
    },
    async (request, reply) => {
      const { domain, email } = request.params;
      const { credentialType = "password", password } = request.body;
      const name = requireDomain(domain);
      const domainId = await identity.domainId(name);
      const failed = () => reply.code(403).send({ message: "authentication failed" });
      if (credentialType !== "password" && credentialType !== "otp") {
        return reply.code(400).send({ message: "not supported" });
      }
      const origin = originOf(request, reply, "identity");
      const user = email.includes("@") ? await identity.user(domainId, name, email).catch(() => null) : null;
      if (credentialType === "password") {
        // An address outside the domain is signed in as nobody (the same Argon2 work, always refused).
        const result = await services.signIn.signIn(user ? user.email : "", password, {
          ...origin,
          account: email,
        });
        if (result.kind === "throttled")
          return reply
            .code(429)
            .header("retry-after", String(result.retryAfter))
            .send({ message: throttledMessage });
        if (result.kind === "password_change_required")
          return reply.code(403).send({ message: "password change required" });
        return result.kind === "ok" ? { message: "success" as const } : failed();
      }
      // Throttled: the guard's `sign_in.throttled` refusal, answered 429 like a throttled password.
      switch (await services.signIn.validateSecondFactor(user, password, { ...origin, account: email })) {
        case "ok":
          return { message: "success" as const };
        case "not_configured":
          return reply.code(403).send({ message: "not supported" });
        case "password_change_required":
          return reply.code(403).send({ message: "password change required" });
        default:
          return failed();
      }
    },
  );

  app.get(
    "/:domain/configured/:credentialType/:email",
    {
      schema: {
        ...integrationRoute(
          "identity",
          "Has the user this credential?",
          "`password`: every active user; `otp`: a user with confirmed TOTP.",
        ),
        params: ConfiguredParams,
        response: {
          200: SuccessBody,
          ...guardResponses("identity", { 403: ["password change required"] }),
          ...errorResponses(
            domainErrors,
            { 404: ["user not found", "not supported", "domain not found"] },
            unavailable,
          ),
        },
      },
    },
    async (request, reply) => {
      const { domain, credentialType, email } = request.params;
      const name = requireDomain(domain);
      const user = await identity.user(await identity.domainId(name), name, email);
      if (user.passwordChangeRequired) return reply.code(403).send({ message: "password change required" });
      if (credentialType === "password") return { message: "success" as const };
      if (credentialType === "otp") {
        return user.totpConfirmed
          ? { message: "success" as const }
          : reply.code(404).send({ message: "user not found" });
      }
      return reply.code(404).send({ message: "not supported" });
    },
  );
}
