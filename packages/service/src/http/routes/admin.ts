import type { FastifyInstance, FastifyReply } from "fastify";
import { readPage } from "../../accounts/paging.ts";
import { toUserView, type UserStatus } from "../../accounts/users.ts";
import type { DeliveryStatus } from "../../db/schema.ts";
import { badRequest, invalid } from "../../errors.ts";
import { maxKeyUploadBodyBytes } from "../../openpgp/keys.ts";
import type { Services } from "../../services.ts";
import { requireScope } from "../auth.ts";

type Params = Record<string, string>;
type Query = Record<string, unknown>;
type Body = Record<string, unknown>;

const body = (raw: unknown): Body => {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== "object" || Array.isArray(raw)) throw invalid("body: must be a JSON object");
  return raw as Body;
};

const numericId = (raw: string | undefined): number => {
  if (!raw || !/^\d{1,10}$/.test(raw)) throw badRequest("id: must be a number");
  return Number(raw);
};

const created = (reply: FastifyReply, payload: unknown) => reply.code(201).send(payload);

/**
 * The admin API (scope `admin`, JSON in and out). Each handler reads its input, calls one service
 * function and shapes the answer; the rules live in the services, shared with the console and jobs.
 */
export async function adminRoutes(app: FastifyInstance, services: Services) {
  requireScope(app, (plain) => services.tokens.authenticate(plain), "admin");
  const { domains, users, aliases, lifecycle, settings, tokens, webhooks, openPgpKeys } = services;
  const prefix = "/api/admin";

  // Domains.
  app.get(`${prefix}/domains`, async (request) => domains.list(readPage(request.query as Query)));
  app.post(`${prefix}/domains`, async (request, reply) =>
    created(reply, await domains.create(body(request.body).name as string)),
  );
  app.get(`${prefix}/domains/:name`, async (request) => {
    const domain = await domains.get((request.params as Params).name ?? "");
    return { ...domain, ...(await domains.contents(domain.id)) };
  });
  app.delete(`${prefix}/domains/:name`, async (request, reply) => {
    const force = (request.query as Query).force === "true";
    await domains.delete((request.params as Params).name ?? "", lifecycle, force);
    return reply.code(204).send();
  });

  // Users.
  app.get(`${prefix}/users`, async (request) => {
    const query = request.query as Query;
    const status = (query.status ?? "active") as string;
    if (!["active", "deleted", "all"].includes(status))
      throw invalid("status: must be active, deleted or all");
    const domain = typeof query.domain === "string" && query.domain !== "" ? query.domain : undefined;
    return users.list(readPage(query), { domain, status: status as UserStatus });
  });
  app.post(`${prefix}/users`, async (request, reply) => {
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
  app.get(`${prefix}/users/:email`, async (request) => {
    const user = await users.get((request.params as Params).email ?? "");
    return toUserView(user);
  });
  app.patch(`${prefix}/users/:email`, async (request) =>
    toUserView(await users.update((request.params as Params).email ?? "", body(request.body))),
  );
  app.delete(`${prefix}/users/:email`, async (request, reply) => {
    await lifecycle.delete((request.params as Params).email ?? "");
    return reply.code(204).send();
  });
  app.post(`${prefix}/users/:email/reset`, async (request) =>
    lifecycle.reset((request.params as Params).email ?? "", body(request.body).password),
  );
  app.post(`${prefix}/users/:email/restore`, async (request) =>
    lifecycle.restore((request.params as Params).email ?? "", body(request.body).password),
  );
  app.put(`${prefix}/users/:email/totp`, async (request) =>
    users.enableTotp((request.params as Params).email ?? "", body(request.body)),
  );
  app.delete(`${prefix}/users/:email/totp`, async (request, reply) => {
    await users.disableTotp((request.params as Params).email ?? "");
    return reply.code(204).send();
  });

  // Aliases.
  app.get(`${prefix}/aliases`, async (request) => {
    const query = request.query as Query;
    const text = (name: string) =>
      typeof query[name] === "string" && query[name] !== "" ? (query[name] as string) : undefined;
    return aliases.list(readPage(query), { domain: text("domain"), owner: text("owner") });
  });
  app.post(`${prefix}/aliases`, async (request, reply) => {
    const input = body(request.body);
    const alias = await aliases.create({
      source: input.source as string,
      destinations: input.destinations as string[] | undefined,
      owner: (input.owner as string | null | undefined) ?? null,
      smtpQuota: input.smtpQuota as { per_hour?: number; per_day?: number } | undefined,
    });
    return created(reply, await aliases.get(alias.source));
  });
  app.get(`${prefix}/aliases/:source`, async (request) =>
    aliases.get((request.params as Params).source ?? ""),
  );
  app.patch(`${prefix}/aliases/:source`, async (request) =>
    aliases.update((request.params as Params).source ?? "", body(request.body)),
  );
  app.delete(`${prefix}/aliases/:source`, async (request, reply) => {
    await lifecycle.deleteAlias((request.params as Params).source ?? "");
    return reply.code(204).send();
  });

  // Settings.
  app.get(`${prefix}/settings`, async () => settings.all());
  app.patch(`${prefix}/settings`, async (request) => settings.update(body(request.body)));

  // API tokens.
  app.get(`${prefix}/api-tokens`, async () => ({ items: await tokens.list() }));
  app.post(`${prefix}/api-tokens`, async (request, reply) => {
    const input = body(request.body);
    const result = await tokens.create(input.name, input.scopes);
    return created(reply, { ...result.token, token: result.plainToken });
  });
  app.delete(`${prefix}/api-tokens/:id`, async (request, reply) => {
    await tokens.delete(numericId((request.params as Params).id));
    return reply.code(204).send();
  });

  // Webhooks.
  app.get(`${prefix}/webhooks`, async () => ({ items: await webhooks.list() }));
  app.post(`${prefix}/webhooks`, async (request, reply) => {
    const result = await webhooks.create(body(request.body));
    return created(reply, { ...result.endpoint, secret: result.secret });
  });
  app.get(`${prefix}/webhooks/:id`, async (request) =>
    webhooks.get(numericId((request.params as Params).id)),
  );
  app.patch(`${prefix}/webhooks/:id`, async (request) =>
    webhooks.update(numericId((request.params as Params).id), body(request.body)),
  );
  app.delete(`${prefix}/webhooks/:id`, async (request, reply) => {
    await webhooks.delete(numericId((request.params as Params).id));
    return reply.code(204).send();
  });
  app.get(`${prefix}/webhooks/:id/deliveries`, async (request) => {
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
  app.post(`${prefix}/webhook-deliveries/:id/retry`, async (request) =>
    webhooks.retry((request.params as Params).id ?? ""),
  );

  // OpenPGP keys: armored text, or the binary key as application/octet-stream / application/pgp-keys.
  app.addContentTypeParser(
    ["application/octet-stream", "application/pgp-keys"],
    { parseAs: "buffer" },
    (_request, payload, done) => done(null, payload),
  );
  app.addContentTypeParser("text/plain", { parseAs: "string" }, (_request, payload, done) =>
    done(null, payload),
  );
  // Keys may be far larger than the 64 KiB of other bodies (many user IDs, photos): this route
  // takes bodies up to the importer's limit, and the importer checks the key itself.
  app.put(`${prefix}/openpgp-keys/:email`, { bodyLimit: maxKeyUploadBodyBytes }, async (request) => {
    const raw = request.body;
    const data =
      raw instanceof Buffer
        ? new Uint8Array(raw)
        : typeof raw === "string"
          ? raw
          : typeof (raw as Body | undefined)?.key === "string"
            ? ((raw as Body).key as string)
            : null;
    if (data === null)
      throw invalid('key: send the key as the body (armored text or binary), or JSON {"key": "<armored>"}');
    return openPgpKeys.import((request.params as Params).email ?? "", data);
  });
  app.get(`${prefix}/openpgp-keys/:email`, async (request) =>
    openPgpKeys.get((request.params as Params).email ?? ""),
  );
  app.delete(`${prefix}/openpgp-keys/:email`, async (request, reply) => {
    await openPgpKeys.delete((request.params as Params).email ?? "");
    return reply.code(204).send();
  });
}
