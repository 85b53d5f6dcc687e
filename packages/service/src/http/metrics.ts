import { timingSafeEqual } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { Metrics } from "../metrics/metrics.ts";
import { presentedToken } from "./auth.ts";
import { errorBody } from "./schemas.ts";

const exposition = "text/plain; version=0.0.4; charset=utf-8";

/** Prometheus metrics, behind METRICS_TOKEN; without that variable the route does not exist. */
export async function metricsRoutes(
  app: FastifyInstance,
  { metrics }: { metrics: Metrics },
  metricsToken: string | null,
) {
  if (metricsToken === null) return;
  const expected = Buffer.from(metricsToken);
  app.get(
    "/metrics",
    {
      schema: {
        tags: ["metrics"],
        summary: "Prometheus metrics",
        description: "Exists only when `METRICS_TOKEN` is set; that value is its bearer token.",
        security: [{ metricsToken: [] }],
        response: {
          200: {
            description: "Prometheus text exposition format 0.0.4",
            content: {
              "text/plain": {
                schema: Type.String({
                  examples: [
                    '# TYPE http_requests_total counter\nhttp_requests_total{method="GET",route="/health",status="200"} 1\n',
                  ],
                }),
              },
            },
          },
          401: errorBody("Missing or wrong metrics token", "Invalid metrics token"),
        },
      },
    },
    async (request, reply) => {
      const given = Buffer.from(presentedToken(request) ?? "");
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        return reply.code(401).send({ message: "Invalid metrics token" });
      }
      return reply.type(exposition).send(await metrics.text());
    },
  );
}
