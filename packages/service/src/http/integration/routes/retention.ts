import type { FastifyInstance } from "fastify";
import type { RetentionService } from "../../../accounts/retention.ts";
import { badRequest } from "../../../errors.ts";
import { requireScope, type TokenCheck } from "../../auth.ts";
import { requireAddress } from "../../params.ts";

/** Activity reports and the inactive-user list (spec 4.5). */
export async function retentionRoutes(
  app: FastifyInstance,
  tokenCheck: TokenCheck,
  services: { retention: RetentionService },
) {
  requireScope(app, tokenCheck, "retention");

  app.put("/:email/touch", async (request) => {
    const { email } = request.params as { email: string };
    await services.retention.touch(requireAddress(email).email, touchTimestamp(request.body));
    return [];
  });

  app.get("/users", async () => services.retention.inactiveUsers());
}

/** The optional `timestamp`: a whole number of Unix seconds (form bodies carry it as a string). */
function touchTimestamp(body: unknown): number | null {
  if (body === undefined || body === null || body === "") return null;
  if (typeof body !== "object" || Array.isArray(body)) throw badRequest("body must be a JSON object");
  const value = (body as Record<string, unknown>).timestamp;
  if (value === undefined || value === null) return null;
  const number = typeof value === "string" && /^\d{1,12}$/.test(value) ? Number(value) : value;
  if (typeof number !== "number" || !Number.isSafeInteger(number) || number < 0) {
    throw badRequest("timestamp: must be a whole number of Unix seconds");
  }
  return number;
}
