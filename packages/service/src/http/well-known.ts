import type { FastifyInstance } from "fastify";
import { mtaStsPolicy } from "../accounts/mta-sts.ts";
import type { SettingsService } from "../accounts/settings.ts";
import type { DatabaseHandle } from "../db/database.ts";
import type { WkdService } from "../openpgp/wkd.ts";

/** Public, unauthenticated documents: WKD keys and policy, MTA-STS policy (spec 4.6). */
export async function wellKnownRoutes(
  app: FastifyInstance,
  { wkd, database, settings }: { wkd: WkdService; database: DatabaseHandle; settings: SettingsService },
) {
  app.get("/.well-known/openpgpkey/:domain/hu/:hash", async (request, reply) => {
    const { domain, hash } = request.params as { domain: string; hash: string };
    const key = await wkd.find(domain, hash);
    reply.header("Access-Control-Allow-Origin", "*");
    if (!key) return reply.code(404).type("text/plain; charset=utf-8").send("");
    return reply.type("application/octet-stream").send(key);
  });

  app.get("/.well-known/openpgpkey/:domain/policy", async (_request, reply) =>
    reply.header("Access-Control-Allow-Origin", "*").type("text/plain; charset=utf-8").send(""),
  );

  app.get("/.well-known/mta-sts.txt", async (request, reply) => {
    const policy = await mtaStsPolicy(request.headers.host, database.db, settings);
    if (policy === null) return reply.code(404).type("text/plain; charset=utf-8").send("");
    return reply.type("text/plain; charset=utf-8").send(policy);
  });
}
