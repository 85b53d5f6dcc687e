import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { type IdentityService, identityUser } from "../../../accounts/identity.ts";
import { readSearch } from "../../../accounts/paging.ts";
import type { SignInService } from "../../../accounts/sign-in.ts";
import { requireScope, type TokenCheck } from "../../auth.ts";
import { queryInteger, requireDomain } from "../../params.ts";

const ValidateBody = Type.Object({
  credentialType: Type.Optional(Type.String()),
  password: Type.String({ minLength: 1 }),
});

/** The identity provider's user storage (spec 4.4); every answer is scoped to one managed domain. */
export async function identityRoutes(
  app: FastifyInstance,
  tokenCheck: TokenCheck,
  services: { identity: IdentityService; signIn: SignInService },
) {
  requireScope(app, tokenCheck, "identity");
  const { identity } = services;

  app.get("/:domain", async (request) => {
    const { domain } = request.params as { domain: string };
    const query = request.query as Record<string, unknown>;
    const domainId = await identity.domainId(requireDomain(domain));
    const search = readSearch(query.search);
    const max = queryInteger(query.max, "max", 10, 500);
    const first = queryInteger(query.first, "first", 0, Number.MAX_SAFE_INTEGER);
    return identity.search(domainId, search, max, first);
  });

  app.get("/:domain/count", async (request) => {
    const { domain } = request.params as { domain: string };
    return identity.count(await identity.domainId(requireDomain(domain)));
  });

  app.get("/:domain/user/:email", async (request) => {
    const { domain, email } = request.params as { domain: string; email: string };
    const name = requireDomain(domain);
    const user = await identity.user(await identity.domainId(name), name, email);
    return identityUser(user.email);
  });

  app.post("/:domain/validate/:email", { schema: { body: ValidateBody } }, async (request, reply) => {
    const { domain, email } = request.params as { domain: string; email: string };
    const { credentialType = "password", password } = request.body as {
      credentialType?: string;
      password: string;
    };
    const name = requireDomain(domain);
    const domainId = await identity.domainId(name);
    const failed = () => reply.code(403).send({ message: "authentication failed" });
    if (credentialType !== "password" && credentialType !== "otp") {
      return reply.code(400).send({ message: "not supported" });
    }
    const user = email.includes("@") ? await identity.user(domainId, name, email).catch(() => null) : null;
    if (credentialType === "password") {
      if (!user) {
        await services.signIn.signIn("", password);
        return failed();
      }
      const result = await services.signIn.signIn(user.email, password);
      if (result.kind === "password_change_required")
        return reply.code(403).send({ message: "password change required" });
      return result.kind === "ok" ? { message: "success" } : failed();
    }
    switch (await services.signIn.validateSecondFactor(user, password)) {
      case "ok":
        return { message: "success" };
      case "not_configured":
        return reply.code(403).send({ message: "not supported" });
      case "password_change_required":
        return reply.code(403).send({ message: "password change required" });
      default:
        return failed();
    }
  });

  app.get("/:domain/configured/:credentialType/:email", async (request, reply) => {
    const { domain, credentialType, email } = request.params as {
      domain: string;
      credentialType: string;
      email: string;
    };
    const name = requireDomain(domain);
    const user = await identity.user(await identity.domainId(name), name, email);
    if (user.passwordChangeRequired) return reply.code(403).send({ message: "password change required" });
    if (credentialType === "password") return { message: "success" };
    if (credentialType === "otp") {
      return user.totpConfirmed
        ? { message: "success" }
        : reply.code(404).send({ message: "user not found" });
    }
    return reply.code(404).send({ message: "not supported" });
  });
}
