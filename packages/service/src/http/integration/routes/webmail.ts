import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { AliasService } from "../../../accounts/aliases.ts";
import type { LifecycleService } from "../../../accounts/lifecycle.ts";
import {
  minPasswordLength,
  passwordIdentical,
  passwordLeaked,
  passwordLikeAppPassword,
  passwordTooLong,
  passwordTooShort,
} from "../../../accounts/password-policy.ts";
import { ownerOrigin } from "../../../accounts/security-events.ts";
import { passwordProof, type SignInService } from "../../../accounts/sign-in.ts";
import { type AnyRefusal, ServiceError } from "../../../errors.ts";
import { requireScope, type TokenCheck } from "../../auth.ts";
import { bodyErrors, ClientAddressHeaders, SuccessBody } from "../../schemas.ts";
import {
  AddressList,
  bodyFieldErrors,
  errorResponses,
  guardResponses,
  integrationRoute,
  unavailable,
} from "../route-schemas.ts";
import { originOf, refuseSignIn, throttleErrors } from "../sign-in-answers.ts";

const CredentialsBody = Type.Object(
  {
    email: Type.String({ minLength: 1 }),
    password: Type.String({ minLength: 1 }),
  },
  { examples: [{ email: "alice@example.org", password: "correct horse battery staple" }] },
);

const PasswordChangeBody = Type.Object(
  {
    email: Type.String({ minLength: 1 }),
    password: Type.String({ minLength: 1, description: "The current password" }),
    newPassword: Type.String({ minLength: 1 }),
  },
  {
    examples: [
      {
        email: "alice@example.org",
        password: "correct horse battery staple",
        newPassword: "a brand new passphrase",
      },
    ],
  },
);

/**
 * The password rule's refusals (accounts/password-policy.ts) in this endpoint's words: its field is
 * `newPassword`, and Roundcube's plugin shows these texts as they are.
 */
const policyRefusals: [AnyRefusal, string][] = [
  [passwordTooShort, `newPassword: the password must have at least ${minPasswordLength} characters`],
  [passwordTooLong, "newPassword: the password is too long"],
  [passwordLeaked, "newPassword: the password has been leaked in a data breach; choose another one"],
  [passwordIdentical, "newPassword: the new password is identical with the old one"],
  [passwordLikeAppPassword, "newPassword: this has the form of an app password; choose another one"],
];
const keyCannotBeOpened = "the MailCrypt key cannot be opened with this password";

/**
 * The webmail's plugins (spec 4.3): the alias list, and the password change of Roundcube's password
 * plugin (`httpapi` driver). Registered under /api/webmail (and userli's /api/roundcube).
 */
export async function webmailRoutes(
  scope: FastifyInstance,
  tokenCheck: TokenCheck,
  services: {
    signIn: SignInService;
    aliases: AliasService;
    lifecycle: LifecycleService;
  },
) {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  requireScope(app, tokenCheck, "webmail");

  app.post(
    "/aliases",
    {
      schema: {
        ...integrationRoute(
          "webmail",
          "A user's aliases",
          "The sources of the active aliases the user owns, for the webmail's sender identities; the user's own password is the proof.",
        ),
        body: CredentialsBody,
        headers: ClientAddressHeaders,
        response: {
          200: AddressList("Alias addresses the user owns", ["a1@example.org", "team@example.com"]),
          ...guardResponses("webmail", {
            401: ["Bad credentials"],
            403: ["user disabled due to spam role", "user password change required"],
          }),
          ...errorResponses(bodyErrors, bodyFieldErrors("password", "email"), throttleErrors, unavailable),
        },
      },
    },
    async (request, reply) => {
      const { email, password } = request.body;
      const result = await services.signIn.signIn(email, password, originOf(request, reply, "webmail"));
      if (result.kind !== "ok") {
        const failed = { status: 401, message: "Bad credentials" } as const;
        const retryAfter = result.kind === "throttled" ? result.retryAfter : undefined;
        return refuseSignIn(reply, result.kind, { unknown: failed, wrongPassword: failed }, retryAfter);
      }
      return services.aliases.ownedBy(result.user);
    },
  );

  app.post(
    "/password",
    {
      schema: {
        ...integrationRoute(
          "webmail",
          "Change a user's password",
          "The password change of the account page, for the webmail's password plugin (Roundcube's `httpapi` " +
            "driver, see docs/connecting.md): the current password is the proof, the new one must pass the " +
            "password policy (length, and the leaked-password range API when PWNED_PASSWORDS_URL is set). " +
            "The MailCrypt key is sealed under the new password, so mail stays readable; the change-required " +
            "flag clears and the user's web sessions end. Failed attempts count for the brute-force policy.",
        ),
        body: PasswordChangeBody,
        headers: ClientAddressHeaders,
        response: {
          200: SuccessBody,
          ...guardResponses("webmail", {
            401: ["Bad credentials"],
            403: ["user disabled due to spam role"],
          }),
          ...errorResponses(
            bodyErrors,
            { 409: [keyCannotBeOpened, "the password was changed concurrently; try again"] },
            bodyFieldErrors("password", "email", "newPassword"),
            { 422: policyRefusals.map(([, words]) => words) },
            throttleErrors,
            unavailable,
          ),
        },
      },
    },
    async (request, reply) => {
      const { email, password, newPassword } = request.body;
      const origin = originOf(request, reply, "webmail");
      const result = await services.signIn.signIn(email, password, origin);
      // A user who must change the password may do it here: that is what the flag asks for.
      if (result.kind !== "ok" && result.kind !== "password_change_required") {
        const failed = { status: 401, message: "Bad credentials" } as const;
        const retryAfter = result.kind === "throttled" ? result.retryAfter : undefined;
        return refuseSignIn(reply, result.kind, { unknown: failed, wrongPassword: failed }, retryAfter);
      }
      try {
        await services.lifecycle.changePassword(
          passwordProof(result),
          newPassword,
          ownerOrigin("webmail", origin.client?.address ?? request.ip),
        );
      } catch (error) {
        const words = policyRefusals.find(
          ([definition]) => error instanceof ServiceError && error.is(definition),
        );
        if (words) return reply.code(422).send({ message: words[1] });
        throw error;
      }
      return { message: "success" as const };
    },
  );
}
