import type { FastifyInstance } from "fastify";
import { type DatabaseHandle, pingDatabase } from "../db/database.ts";

/** For load balancers and monitoring: no token, 200 while the database answers, 503 otherwise. */
export async function healthRoutes(app: FastifyInstance, { database }: { database: DatabaseHandle }) {
  app.get("/health", async (_request, reply) => {
    const reachable = await pingDatabase(database);
    return reply
      .code(reachable ? 200 : 503)
      .send({ status: reachable ? "ok" : "unavailable", database: reachable ? "reachable" : "unreachable" });
  });
}
