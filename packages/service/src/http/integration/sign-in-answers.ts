import type { FastifyReply, FastifyRequest } from "fastify";
import { clientAddressInvalid, isClientAddress } from "../../accounts/client-address.ts";
import type { CheckOrigin, SignInResult } from "../../accounts/sign-in.ts";
import type { Door } from "../../accounts/sign-in-guard.ts";
import { cryptoBusy, signalOnClose } from "../../credentials/crypto-pool.ts";

export const throttledMessage = "too many failed sign-ins, try again later";
/**
 * The answers of the sign-in guard (accounts/sign-in-guard.ts, docs/security.md) every guarded door
 * gives: a client address that is no IP address, a throttled attempt, a crypto queue too long.
 */
export const throttleErrors = {
  400: [clientAddressInvalid.apiText({})],
  429: [throttledMessage],
  503: [cryptoBusy.apiText({})],
} as const;

/**
 * Where a check comes from at a door of the integration API: the door, the client's address when
 * the door names it (an IP address, or a 400), and a signal that drops the queued work of a client
 * that hung up.
 */
export function originOf(request: FastifyRequest, reply: FastifyReply, door: Door): CheckOrigin {
  const value = request.headers["x-client-address"];
  const address = typeof value === "string" ? value.trim() : "";
  if (address !== "" && !isClientAddress(address)) throw clientAddressInvalid();
  return { door, client: address === "" ? {} : { address }, signal: signalOnClose(reply.raw) };
}

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
