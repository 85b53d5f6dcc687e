import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { SignInService } from "../../../accounts/sign-in.ts";
import { type DatabaseHandle, pingDatabase } from "../../../db/database.ts";
import { requireScope, type TokenCheck } from "../../auth.ts";
import { notFoundAnswer } from "../../errors.ts";
import { requireAddress } from "../../params.ts";
import { andThen } from "../eventually.ts";
import type { MessageLookups } from "../lookups.ts";

const EmailParams = Type.Object({ email: Type.String() });
const PasswordBody = Type.Object({ password: Type.String({ minLength: 1 }) });

/** Dovecot's userdb and passdb (spec 4.1). */
export async function mailboxServerRoutes(
  app: FastifyInstance,
  tokenCheck: TokenCheck,
  services: { lookups: MessageLookups; signIn: SignInService; database: DatabaseHandle },
) {
  requireScope(app, tokenCheck, "mailbox-server");

  // Dovecot's adapter checks this at start: it must fail while the database does.
  app.get("/status", async (_request, reply) =>
    (await pingDatabase(services.database))
      ? { message: "success" }
      : reply.code(503).send({ message: "database unavailable, try again" }),
  );

  // Not async: sent in the same turn when the database answers at once (see eventually.ts).
  app.get("/:email", { schema: { params: EmailParams } }, (request, reply) => {
    const { email } = request.params as { email: string };
    return andThen(services.lookups.userdb(requireAddress(email)), (body) =>
      body ? { message: "success", body } : notFoundAnswer(reply, "user not found"),
    );
  });

  app.post("/:email", { schema: { params: EmailParams, body: PasswordBody } }, async (request, reply) => {
    const { email } = request.params as { email: string };
    const { password } = request.body as { password: string };
    requireAddress(email);
    const result = await services.signIn.signIn(email, password, { unlockMailCrypt: true });
    switch (result.kind) {
      case "unknown":
        return reply.code(404).send({ message: "user not found" });
      case "wrong_password":
        return reply.code(401).send({ message: "authentication failed" });
      case "spam":
        return reply.code(403).send({ message: "user disabled due to spam role" });
      case "password_change_required":
        return reply.code(403).send({ message: "user password change required" });
    }
    const { mailCrypt, user } = result;
    if (mailCrypt.state === "failed") {
      request.log.error(
        { user: user.email, reason: mailCrypt.reason },
        "MailCrypt key could not be decrypted",
      );
      return reply.code(500).send({ message: mailCrypt.reason, error: mailCrypt.reason });
    }
    return {
      message: "success",
      body: {
        mailCrypt: mailCrypt.state === "unlocked" ? 2 : 0,
        mailCryptPrivateKey: mailCrypt.state === "unlocked" ? mailCrypt.privateKey : "",
        mailCryptPublicKey: user.mailCryptPublicKey ?? "",
      },
    };
  });
}
