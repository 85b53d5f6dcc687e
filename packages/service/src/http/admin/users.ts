import type { FastifyInstance } from "fastify";
import type { LifecycleService } from "../../accounts/lifecycle.ts";
import { readPage } from "../../accounts/paging.ts";
import { toUserView, type UserService, type UserStatus } from "../../accounts/users.ts";
import { invalid } from "../../errors.ts";
import { body, created, type Params, type Query } from "./input.ts";

export async function userRoutes(
  app: FastifyInstance,
  { users, lifecycle }: { users: UserService; lifecycle: LifecycleService },
) {
  app.get("/api/admin/users", async (request) => {
    const query = request.query as Query;
    const status = (query.status ?? "active") as string;
    if (!["active", "deleted", "all"].includes(status))
      throw invalid("status: must be active, deleted or all");
    const domain = typeof query.domain === "string" && query.domain !== "" ? query.domain : undefined;
    return users.list(readPage(query), { domain, status: status as UserStatus });
  });
  app.post("/api/admin/users", async (request, reply) => {
    const input = body(request.body);
    const result = await users.create({
      email: input.email as string,
      password: input.password as string,
      roles: input.roles as string[] | undefined,
      mailCrypt: input.mailCrypt as boolean | undefined,
      quota: input.quota as number | null | undefined,
      passwordChangeRequired: input.passwordChangeRequired as boolean | undefined,
      smtpQuota: input.smtpQuota as { per_hour?: number; per_day?: number } | undefined,
    });
    const view = toUserView(result.user);
    return created(reply, result.recoveryToken ? { ...view, recoveryToken: result.recoveryToken } : view);
  });
  app.get("/api/admin/users/:email", async (request) => {
    const user = await users.get((request.params as Params).email ?? "");
    return toUserView(user);
  });
  app.patch("/api/admin/users/:email", async (request) =>
    toUserView(await users.update((request.params as Params).email ?? "", body(request.body))),
  );
  app.delete("/api/admin/users/:email", async (request, reply) => {
    await lifecycle.delete((request.params as Params).email ?? "");
    return reply.code(204).send();
  });
  app.post("/api/admin/users/:email/reset", async (request) =>
    lifecycle.reset((request.params as Params).email ?? "", body(request.body).password),
  );
  app.post("/api/admin/users/:email/restore", async (request) =>
    lifecycle.restore((request.params as Params).email ?? "", body(request.body).password),
  );
  app.put("/api/admin/users/:email/totp", async (request) =>
    users.enableTotp((request.params as Params).email ?? "", body(request.body)),
  );
  app.delete("/api/admin/users/:email/totp", async (request, reply) => {
    await users.disableTotp((request.params as Params).email ?? "");
    return reply.code(204).send();
  });
}
