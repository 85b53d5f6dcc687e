import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { type DatabaseHandle, pingDatabase } from "../db/database.ts";
import { errorBody } from "./schemas.ts";

const Health = (description: string, example: { status: string; database: string }) =>
  Type.Object(
    { status: Type.String(), database: Type.String() },
    { additionalProperties: false, description, examples: [example] },
  );

/** For load balancers and monitoring: no token, 200 while the database answers, 503 otherwise. */
export async function healthRoutes(app: FastifyInstance, { database }: { database: DatabaseHandle }) {
  app.get(
    "/health",
    {
      schema: {
        tags: ["health"],
        summary: "Is the service up?",
        description: "For load balancers and monitoring; no token.",
        response: {
          200: Health("The database answers", { status: "ok", database: "reachable" }),
          503: Type.Union(
            [
              Health("The database does not answer", { status: "unavailable", database: "unreachable" }),
              errorBody("The service is shutting down", "shutting down, try again"),
            ],
            {
              description: "The database does not answer, or the service is shutting down",
              examples: [
                { status: "unavailable", database: "unreachable" },
                { message: "shutting down, try again" },
              ],
            },
          ),
        },
      },
    },
    async (_request, reply) => {
      const reachable = await pingDatabase(database);
      return reply.code(reachable ? 200 : 503).send({
        status: reachable ? "ok" : "unavailable",
        database: reachable ? "reachable" : "unreachable",
      });
    },
  );
}
