import { randomBytes } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";

/**
 * The CSRF secret's cookie, named like the session cookie: over TLS `__Host-csrf` (Secure, this host
 * only, path /), which a sibling host of the domain or a plain-HTTP answer cannot set or overwrite;
 * `csrf` over plain HTTP (local use, tests). @fastify/csrf-protection knows one name, the plain
 * one: over TLS the request shows it the `__Host-` cookie's value under that name (a plain `csrf`
 * cookie sent along is ignored), and the first token of a visit sets the `__Host-` cookie itself.
 */
export const csrfCookie = (secure: boolean) => (secure ? "__Host-csrf" : "csrf");

/** onRequest: the secret the plugin checks is the one of this request's protocol. */
export function readCsrfSecret(request: FastifyRequest): void {
  if (request.protocol !== "https") return;
  const secret = request.cookies[csrfCookie(true)];
  if (secret) request.cookies[csrfCookie(false)] = secret;
  else delete request.cookies[csrfCookie(false)];
}

/** The CSRF token of a form; over TLS a visit's first one sets the `__Host-` cookie of its secret. */
export function csrfToken(request: FastifyRequest, reply: FastifyReply): string {
  if (request.protocol === "https" && !request.cookies[csrfCookie(false)]) {
    const secret = randomBytes(18).toString("base64url");
    reply.setCookie(csrfCookie(true), secret, { path: "/", httpOnly: true, sameSite: "lax", secure: true });
    request.cookies[csrfCookie(false)] = secret;
  }
  return reply.generateCsrf();
}
