import type { FastifyInstance } from "fastify";
import { mtaStsPolicy } from "../../accounts/mta-sts.ts";
import type { Services } from "../../services.ts";

/** Public, unauthenticated documents: WKD keys and policy, MTA-STS policy (spec 4.6). */
export async function wellKnownRoutes(app: FastifyInstance, services: Services) {
  app.get("/.well-known/openpgpkey/:domain/hu/:hash", async (request, reply) => {
    const { domain, hash } = request.params as { domain: string; hash: string };
    const key = await services.wkd.find(domain, hash);
    reply.header("Access-Control-Allow-Origin", "*");
    if (!key) return reply.code(404).type("text/plain; charset=utf-8").send("");
    return reply.type("application/octet-stream").send(key);
  });

  app.get("/.well-known/openpgpkey/:domain/policy", async (_request, reply) =>
    reply.header("Access-Control-Allow-Origin", "*").type("text/plain; charset=utf-8").send(""),
  );

  app.get("/.well-known/mta-sts.txt", async (request, reply) => {
    const policy = await mtaStsPolicy(request.headers.host, services.database.db, services.settings);
    if (policy === null) return reply.code(404).type("text/plain; charset=utf-8").send("");
    return reply.type("text/plain; charset=utf-8").send(policy);
  });
}
