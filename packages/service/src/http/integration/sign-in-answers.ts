import type { FastifyReply } from "fastify";
import type { SignInResult } from "../../accounts/sign-in.ts";

/** How a door answers an unknown user or a wrong password (the clients expect different words). */
export interface RefusalWords {
  unknown: { status: 401 | 404; message: string };
  wrongPassword: { status: 401; message: string };
}

/**
 * The answer to a refused password sign-in, the same at every door of the integration API (passdb,
 * SMTP auth, webmail): the account states after a correct password are 403 with userli's words.
 */
export function refuseSignIn(
  reply: FastifyReply,
  kind: Exclude<SignInResult["kind"], "ok">,
  words: RefusalWords,
): FastifyReply {
  switch (kind) {
    case "unknown":
      return reply.code(words.unknown.status).send({ message: words.unknown.message });
    case "wrong_password":
      return reply.code(words.wrongPassword.status).send({ message: words.wrongPassword.message });
    case "spam":
      return reply.code(403).send({ message: "user disabled due to spam role" });
    case "password_change_required":
      return reply.code(403).send({ message: "user password change required" });
    case "throttled":
      return reply
        .code(429)
        .header("retry-after", "1")
        .send({ message: "too many failed sign-ins, try again later" });
  }
}
