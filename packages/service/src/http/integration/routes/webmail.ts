import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { AliasService } from "../../../accounts/aliases.ts";
import type { SignInService } from "../../../accounts/sign-in.ts";
import { requireScope, type TokenCheck } from "../../auth.ts";
import { bodyErrors } from "../../schemas.ts";
import {
  AddressList,
  bodyFieldErrors,
  errorResponses,
  guardResponses,
  integrationRoute,
  unavailable,
} from "../route-schemas.ts";
import { refuseSignIn } from "../sign-in-answers.ts";

const CredentialsBody = Type.Object(
  {
    email: Type.String({ minLength: 1 }),
    password: Type.String({ minLength: 1 }),
  },
  { examples: [{ email: "alice@example.org", password: "correct horse battery staple" }] },
);

/** The webmail plugin's alias list (spec 4.3). Registered under /api/webmail (and userli's /api/roundcube). */
export async function webmailRoutes(
  scope: FastifyInstance,
  tokenCheck: TokenCheck,
  services: { signIn: SignInService; aliases: AliasService },
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
        response: {
          200: AddressList("Alias addresses the user owns", ["a1@example.org", "team@example.com"]),
          ...guardResponses("webmail", {
            401: ["Bad credentials"],
            403: ["user disabled due to spam role", "user password change required"],
          }),
          ...errorResponses(bodyErrors, bodyFieldErrors("password", "email"), unavailable),
        },
      },
    },
    async (request, reply) => {
      const { email, password } = request.body;
      const result = await services.signIn.signIn(email, password);
      if (result.kind !== "ok") {
        const failed = { status: 401, message: "Bad credentials" } as const;
        return refuseSignIn(reply, result.kind, { unknown: failed, wrongPassword: failed });
      }
      return services.aliases.ownedBy(result.user);
    },
  );
}
