import type { FastifyInstance } from "fastify";
import { readPage } from "../../accounts/paging.ts";
import type { DeliveryStatus } from "../../db/schema.ts";
import { invalid } from "../../errors.ts";
import type { WebhookService } from "../../webhooks/endpoints.ts";
import { body, created, numericId, type Params, type Query } from "./input.ts";

export async function webhookRoutes(app: FastifyInstance, { webhooks }: { webhooks: WebhookService }) {
  app.get("/api/admin/webhooks", async () => ({ items: await webhooks.list() }));
  app.post("/api/admin/webhooks", async (request, reply) => {
    const result = await webhooks.create(body(request.body));
    return created(reply, { ...result.endpoint, secret: result.secret });
  });
  app.get("/api/admin/webhooks/:id", async (request) =>
    webhooks.get(numericId((request.params as Params).id)),
  );
  app.patch("/api/admin/webhooks/:id", async (request) =>
    webhooks.update(numericId((request.params as Params).id), body(request.body)),
  );
  app.delete("/api/admin/webhooks/:id", async (request, reply) => {
    await webhooks.delete(numericId((request.params as Params).id));
    return reply.code(204).send();
  });
  app.get("/api/admin/webhooks/:id/deliveries", async (request) => {
    const query = request.query as Query;
    const status = query.status;
    if (status !== undefined && status !== "success" && status !== "failed" && status !== "pending") {
      throw invalid("status: must be success, failed or pending");
    }
    const page = readPage(query);
    return webhooks.deliveries(numericId((request.params as Params).id), {
      status: status as DeliveryStatus | undefined,
      limit: page.limit,
      offset: page.offset,
    });
  });
  app.post("/api/admin/webhook-deliveries/:id/retry", async (request) =>
    webhooks.retry((request.params as Params).id ?? ""),
  );
}
