import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { AliasService } from "../../../accounts/aliases.ts";
import type { SignInService } from "../../../accounts/sign-in.ts";
import { requireScope, type TokenCheck } from "../../auth.ts";

const CredentialsBody = Type.Object({
  email: Type.String({ minLength: 1 }),
  password: Type.String({ minLength: 1 }),
});

/** The webmail plugin's alias list (spec 4.3). */
export async function webmailRoutes(
  app: FastifyInstance,
  tokenCheck: TokenCheck,
  services: { signIn: SignInService; aliases: AliasService },
) {
  requireScope(app, tokenCheck, "webmail");

  app.post("/aliases", { schema: { body: CredentialsBody } }, async (request, reply) => {
    const { email, password } = request.body as { email: string; password: string };
    const result = await services.signIn.signIn(email, password);
    switch (result.kind) {
      case "unknown":
      case "wrong_password":
        return reply.code(401).send({ message: "Bad credentials" });
      case "spam":
        return reply.code(403).send({ message: "user disabled due to spam role" });
      case "password_change_required":
        return reply.code(403).send({ message: "user password change required" });
      case "ok":
        return services.aliases.ownedBy(result.user);
    }
  });
}
