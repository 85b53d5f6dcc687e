import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Scope, TokenService } from "../tokens/tokens.ts";

/** `Authorization: Bearer <token>` first; otherwise `X-API-Token`. */
export function presentedToken(request: FastifyRequest): string | null {
  const authorization = request.headers.authorization;
  const bearer = typeof authorization === "string" ? /^\s*Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
  if (bearer?.[1]) return bearer[1];
  const header = request.headers["x-api-token"];
  const value = Array.isArray(header) ? header[0] : header;
  return value && value.trim() !== "" ? value.trim() : null;
}

/**
 * Guards every route of the plugin it is added to: 401 without a valid token, then 403 without
 * the scope. It runs on request, before the body is read.
 */
export function requireScope(app: FastifyInstance, tokens: TokenService, scope: Scope) {
  app.addHook("onRequest", async (request: FastifyRequest, reply: FastifyReply) => {
    const plain = presentedToken(request);
    if (plain === null)
      return reply.code(401).send({ message: "No API token provided", error: "No API token provided" });
    const token = await tokens.authenticate(plain);
    if (!token) return reply.code(401).send({ message: "Invalid API token", error: "Invalid API token" });
    if (!token.scopes.includes(scope)) {
      return reply.code(403).send({ message: `Token does not have required scope: ${scope}` });
    }
    request.apiToken = token;
  });
}

declare module "fastify" {
  interface FastifyRequest {
    apiToken?: import("../tokens/tokens.ts").ApiToken;
  }
}
