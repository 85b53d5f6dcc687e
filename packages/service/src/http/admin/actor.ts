import type { FastifyRequest } from "fastify";
import { type Actor, apiTokenActor } from "../../accounts/admin-scope.ts";

/**
 * The actor of an admin API request: its token (scope `admin` reaches everything), named
 * `api-token:<name>` in the audit log, with the client's address.
 */
export function actorOf(request: FastifyRequest): Actor {
  return apiTokenActor(request.apiToken?.name ?? "unknown", request.ip ?? null);
}
