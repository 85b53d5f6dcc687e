import type { FastifyInstance } from "fastify";
import type { AliasService } from "../../accounts/aliases.ts";
import type { LifecycleService } from "../../accounts/lifecycle.ts";
import { readPage } from "../../accounts/paging.ts";
import { body, created, type Params, type Query } from "./input.ts";

export async function aliasRoutes(
  app: FastifyInstance,
  { aliases, lifecycle }: { aliases: AliasService; lifecycle: LifecycleService },
) {
  app.get("/api/admin/aliases", async (request) => {
    const query = request.query as Query;
    const text = (name: string) =>
      typeof query[name] === "string" && query[name] !== "" ? (query[name] as string) : undefined;
    return aliases.list(readPage(query), { domain: text("domain"), owner: text("owner") });
  });
  app.post("/api/admin/aliases", async (request, reply) => {
    const input = body(request.body);
    const alias = await aliases.create({
      source: input.source as string,
      destinations: input.destinations as string[] | undefined,
      owner: (input.owner as string | null | undefined) ?? null,
      smtpQuota: input.smtpQuota as { per_hour?: number; per_day?: number } | undefined,
    });
    return created(reply, await aliases.get(alias.source));
  });
  app.get("/api/admin/aliases/:source", async (request) =>
    aliases.get((request.params as Params).source ?? ""),
  );
  app.patch("/api/admin/aliases/:source", async (request) =>
    aliases.update((request.params as Params).source ?? "", body(request.body)),
  );
  app.delete("/api/admin/aliases/:source", async (request, reply) => {
    await lifecycle.deleteAlias((request.params as Params).source ?? "");
    return reply.code(204).send();
  });
}
