import type { FastifyReply, FastifyRequest } from "fastify";
import type { SignInResult } from "../../accounts/sign-in.ts";

export const throttledMessage = "too many failed sign-ins, try again later";
/** The answer of a sign-in refused by the brute-force policy (accounts/sign-in-throttle.ts). */
export const throttleErrors = { 429: [throttledMessage] } as const;

/** The brute-force policy applies at every door; the client's address counts when the door names it. */
export const throttleFor = (request: FastifyRequest) => ({
  throttle: { client: clientAddressOf(request) },
});

const clientAddressOf = (request: FastifyRequest): string | undefined => {
  const value = request.headers["x-client-address"];
  return typeof value === "string" && value.length <= 64 ? value.trim() || undefined : undefined;
};

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
  retryAfter = 1,
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
      return reply.code(429).header("retry-after", String(retryAfter)).send({ message: throttledMessage });
  }
}
