import type { FastifyInstance } from "fastify";
import type { TokenService } from "../../tokens/tokens.ts";
import { body, created, numericId, type Params } from "./input.ts";

export async function tokenRoutes(app: FastifyInstance, { tokens }: { tokens: TokenService }) {
  app.get("/api/admin/api-tokens", async () => ({ items: await tokens.list() }));
  app.post("/api/admin/api-tokens", async (request, reply) => {
    const input = body(request.body);
    const result = await tokens.create(input.name, input.scopes);
    return created(reply, { ...result.token, token: result.plainToken });
  });
  app.delete("/api/admin/api-tokens/:id", async (request, reply) => {
    await tokens.delete(numericId((request.params as Params).id));
    return reply.code(204).send();
  });
}
