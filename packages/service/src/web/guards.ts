import type { FastifyReply, FastifyRequest } from "fastify";
import type { Role } from "../accounts/roles.ts";
import { hasRole, isSpam, seeOther } from "./context.ts";
import { errorPage } from "./render.ts";

type Guard = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** Paths a user who must change the password may still use. */
const allowedDuringPasswordChange = new Set(["/account/password", "/logout"]);

/**
 * Signed in (second factor passed). Anonymous visitors go to /login; a user who must change the
 * password is sent to /account/password from everywhere else.
 */
export const signedIn: Guard = async (request, reply) => {
  const session = request.web.session;
  if (session?.stage !== "signed_in") return seeOther(reply, "/login");
  const path = request.url.split("?")[0] ?? "";
  if (session.user.passwordChangeRequired && !allowedDuringPasswordChange.has(path))
    return seeOther(reply, "/account/password");
};

/** Signed in and not flagged as spam (aliases, OpenPGP keys). */
export const notSpam: Guard = async (request, reply) => {
  const done = await signedIn(request, reply);
  if (reply.sent || done) return done;
  if (isSpam(request.web.session!)) return errorPage(request, reply, 403, request.web.t("error.forbidden"));
};

/** Signed in and not suspicious (implied by spam): invite codes. */
export const notSuspicious: Guard = async (request, reply) => {
  const done = await signedIn(request, reply);
  if (reply.sent || done) return done;
  if (hasRole(request.web.session, "ROLE_SUSPICIOUS"))
    return errorPage(request, reply, 403, request.web.t("error.forbidden"));
};

/** Signed in with this role or one that implies it (the admin area). */
export const withRole =
  (role: Role): Guard =>
  async (request, reply) => {
    const done = await signedIn(request, reply);
    if (reply.sent || done) return done;
    if (!hasRole(request.web.session, role))
      return errorPage(request, reply, 403, request.web.t("error.forbidden"));
  };
