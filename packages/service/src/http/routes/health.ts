import type { FastifyInstance } from "fastify";
import { pingDatabase } from "../../db/database.ts";
import type { Services } from "../../services.ts";

/** For load balancers and monitoring: no token, 200 while the database answers, 503 otherwise. */
export async function healthRoutes(app: FastifyInstance, services: Services) {
  app.get("/health", async (_request, reply) => {
    const database = await pingDatabase(services.database);
    return reply
      .code(database ? 200 : 503)
      .send({ status: database ? "ok" : "unavailable", database: database ? "reachable" : "unreachable" });
  });
}
