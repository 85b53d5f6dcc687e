import { timingSafeEqual } from "node:crypto";
import type { FastifyInstance } from "fastify";
import type { Metrics } from "../metrics/metrics.ts";
import { presentedToken } from "./auth.ts";

/** Prometheus metrics, behind METRICS_TOKEN; without that variable the route does not exist. */
export async function metricsRoutes(
  app: FastifyInstance,
  { metrics }: { metrics: Metrics },
  metricsToken: string | null,
) {
  if (metricsToken === null) return;
  const expected = Buffer.from(metricsToken);
  app.get("/metrics", async (request, reply) => {
    const given = Buffer.from(presentedToken(request) ?? "");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return reply.code(401).send({ message: "Invalid metrics token" });
    }
    return reply.type("text/plain; version=0.0.4; charset=utf-8").send(await metrics.text());
  });
}
