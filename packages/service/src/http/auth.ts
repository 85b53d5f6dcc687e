import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { type ApiToken, grantsScope, type Scope } from "../tokens/tokens.ts";

/** Finds the token a presented value stands for: at once where it can (the integration API's fast path), else later. */
export type TokenCheck = (plain: string) => ApiToken | null | Promise<ApiToken | null>;

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
 * the scope. It runs on request, before the body is read. A callback hook rather than an async
 * one, so a token known at once admits the request in the same turn.
 */
export function requireScope(app: FastifyInstance, check: TokenCheck, scope: Scope) {
  app.addHook("onRequest", (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => {
    const plain = presentedToken(request);
    if (plain === null) {
      reply.code(401).send({ message: "No API token provided", error: "No API token provided" });
      return;
    }
    const admit = (token: ApiToken | null) => {
      if (!token) reply.code(401).send({ message: "Invalid API token", error: "Invalid API token" });
      else if (!grantsScope(token.scopes, scope))
        reply.code(403).send({ message: `Token does not have required scope: ${scope}` });
      else {
        request.apiToken = token;
        done();
      }
    };
    const token = check(plain);
    if (!(token instanceof Promise)) return admit(token);
    // Whatever fails on the way (the database, a send) goes to the error handler as an Error: a
    // bare rejection must never let the request through.
    token.then(admit).catch((error: unknown) => {
      done(error instanceof Error ? error : new Error("token check failed"));
    });
  });
}

declare module "fastify" {
  interface FastifyRequest {
    apiToken?: import("../tokens/tokens.ts").ApiToken;
  }
}
