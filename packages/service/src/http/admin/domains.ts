import type { FastifyInstance } from "fastify";
import type { DomainService } from "../../accounts/domains.ts";
import type { LifecycleService } from "../../accounts/lifecycle.ts";
import { readPage } from "../../accounts/paging.ts";
import { body, created, type Params, type Query } from "./input.ts";

export async function domainRoutes(
  app: FastifyInstance,
  { domains, lifecycle }: { domains: DomainService; lifecycle: LifecycleService },
) {
  app.get("/api/admin/domains", async (request) => domains.list(readPage(request.query as Query)));
  app.post("/api/admin/domains", async (request, reply) =>
    created(reply, await domains.create(body(request.body).name as string)),
  );
  app.get("/api/admin/domains/:name", async (request) => {
    const domain = await domains.get((request.params as Params).name ?? "");
    return { ...domain, ...(await domains.contents(domain.id)) };
  });
  app.delete("/api/admin/domains/:name", async (request, reply) => {
    const force = (request.query as Query).force === "true";
    await domains.delete((request.params as Params).name ?? "", lifecycle, force);
    return reply.code(204).send();
  });
}
