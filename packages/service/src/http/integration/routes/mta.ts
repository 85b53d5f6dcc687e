import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { SignInService } from "../../../accounts/sign-in.ts";
import { requireScope, type TokenCheck } from "../../auth.ts";
import { notFoundAnswer } from "../../errors.ts";
import { requireAddress, requireDomain } from "../../params.ts";
import { andThen } from "../eventually.ts";
import type { MessageLookups } from "../lookups.ts";

const EmailParams = Type.Object({ email: Type.String() });
const AuthBody = Type.Object({
  email: Type.String({ minLength: 1 }),
  password: Type.String({ minLength: 1 }),
});

/** Postfix lookups and SMTP authentication (spec 4.2). */
export async function mtaRoutes(
  app: FastifyInstance,
  tokenCheck: TokenCheck,
  services: { lookups: MessageLookups; signIn: SignInService },
) {
  requireScope(app, tokenCheck, "mta");
  const { lookups } = services;
  // The lookups are not async functions: an answer the database gives at once is sent in the same
  // turn (see eventually.ts); Fastify sends a returned value or awaits a returned promise.

  app.get("/domain/:domain", (request) => {
    const { domain } = request.params as { domain: string };
    return lookups.isManagedDomain(requireDomain(domain));
  });

  app.get("/mailbox/:email", { schema: { params: EmailParams } }, (request) => {
    const { email } = request.params as { email: string };
    return lookups.hasMailbox(requireAddress(email));
  });

  app.get("/alias/:email", { schema: { params: EmailParams } }, (request) => {
    const { email } = request.params as { email: string };
    return lookups.aliasDestinations(requireAddress(email));
  });

  app.get("/senders/:email", { schema: { params: EmailParams } }, (request) => {
    const { email } = request.params as { email: string };
    return lookups.senders(requireAddress(email));
  });

  app.get("/smtp_quota/:email", { schema: { params: EmailParams } }, (request, reply) => {
    const { email } = request.params as { email: string };
    return andThen(
      lookups.smtpQuota(requireAddress(email)),
      (limits) => limits ?? notFoundAnswer(reply, "user not found"),
    );
  });

  app.post("/auth", { schema: { body: AuthBody } }, async (request, reply) => {
    const { email, password } = request.body as { email: string; password: string };
    const result = await services.signIn.signIn(email, password);
    switch (result.kind) {
      case "unknown":
      case "wrong_password":
        return reply.code(401).send({ message: "authentication failed" });
      case "spam":
        return reply.code(403).send({ message: "user disabled due to spam role" });
      case "password_change_required":
        return reply.code(403).send({ message: "user password change required" });
      case "ok":
        return { message: "success" };
    }
  });
}
