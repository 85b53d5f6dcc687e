import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { DeliveryStatus } from "../../../db/schema.ts";
import { isRefusal } from "../../../errors.ts";
import {
  deliveryNotFailed,
  type WebhookInput,
  webhookDisabled,
  webhookDomainNotManaged,
  webhookDomainsNotList,
  webhookEventsEmpty,
  webhookEventUnknown,
  webhookNotFound,
  webhookSecretLength,
  webhookUrlInvalid,
} from "../../../webhooks/endpoints.ts";
import { isWebhookEvent, webhookEvents, webhookRequestHeaders } from "../../../webhooks/payload.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../../context.ts";
import { type RefusalFields, refusalText } from "../../refusals.ts";
import {
  actorOf,
  adminPage,
  adminRoutes,
  type Form,
  pageLinks,
  pageOf,
  param,
  type Query,
  refusedFields,
  text,
  texts,
  wholeNumber,
} from "./common.ts";

const statuses: DeliveryStatus[] = ["pending", "success", "failed"];
const perPage = 20;

const endpointFields: RefusalFields = [
  [webhookUrlInvalid, "url"],
  [webhookEventsEmpty, "events"],
  [webhookEventUnknown, "events"],
  [webhookSecretLength, "secret"],
  [webhookDomainsNotList, "domains"],
  [webhookDomainNotManaged, "domains"],
];

/** The endpoint id of the path, or a 404 for anything that is not one. */
function endpointId(request: FastifyRequest): number {
  const id = wholeNumber(param(request, "id"));
  if (id === undefined || !Number.isFinite(id)) throw webhookNotFound();
  return id;
}

/**
 * `/admin/webhooks…` (admins only): endpoints (URL, events, domains, secret, enabled), each one's
 * delivery log with status and event filters, a delivery's detail (the request as sent, the answer,
 * attempts, times, error) and the manual retry of a failed delivery.
 */
export async function adminWebhookPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  const { guarded, posted } = adminRoutes(app);

  app.get("/admin/webhooks", guarded, async (request, reply) => {
    const actor = actorOf(request);
    const endpoints = await admin.webhooks.list(actor);
    const backlog = await admin.webhooks.backlog(actor);
    return adminPage(request, reply, "admin/webhooks/list", { endpoints, backlog });
  });

  const form = async (
    request: FastifyRequest,
    reply: FastifyReply,
    mode: "create" | "edit",
    values: Record<string, unknown>,
    errors: FieldErrors = {},
    status = 200,
  ) =>
    adminPage(
      request,
      reply,
      "admin/webhooks/form",
      {
        mode,
        values,
        errors,
        events: webhookEvents,
        action: mode === "create" ? "/admin/webhooks/new" : `/admin/webhooks/${values.id}/edit`,
      },
      status,
    );

  const valuesOf = (body: Form) => ({
    url: text(body.url).trim(),
    events: texts(body.events).filter(isWebhookEvent),
    domains: text(body.domains),
    secret: text(body.secret),
    enabled: text(body.enabled) === "yes",
  });

  const inputOf = (values: ReturnType<typeof valuesOf>): WebhookInput => ({
    url: values.url,
    events: values.events,
    domains: values.domains
      .split(/[\s,]+/)
      .map((d) => d.trim())
      .filter(Boolean),
    enabled: values.enabled,
    ...(values.secret === "" ? {} : { secret: values.secret }),
  });

  app.get("/admin/webhooks/new", guarded, async (request, reply) => {
    await admin.webhooks.list(actorOf(request));
    return form(request, reply, "create", { events: [...webhookEvents], enabled: true });
  });

  app.post<{ Body: Form }>("/admin/webhooks/new", posted, async (request, reply) => {
    const actor = actorOf(request);
    const values = valuesOf(request.body ?? {});
    if (values.url === "")
      return form(request, reply, "create", values, { url: { key: "form.required" } }, 422);
    try {
      const { endpoint, secret } = await admin.webhooks.create(actor, inputOf(values));
      // The secret is shown in this answer only (it signs every delivery).
      return adminPage(request, reply, "admin/webhooks/created", { endpoint, secret });
    } catch (error) {
      const refused = refusedFields(reply, error, endpointFields, "url");
      if (refused) return form(request, reply, "create", values, refused.errors, refused.status);
      throw error;
    }
  });

  app.get("/admin/webhooks/:id/edit", guarded, async (request, reply) => {
    const endpoint = await admin.webhooks.get(actorOf(request), endpointId(request));
    return form(request, reply, "edit", {
      id: endpoint.id,
      url: endpoint.url,
      events: endpoint.events,
      domains: endpoint.domains.join("\n"),
      enabled: endpoint.enabled,
    });
  });

  app.post<{ Body: Form }>("/admin/webhooks/:id/edit", posted, async (request, reply) => {
    const actor = actorOf(request);
    const endpoint = await admin.webhooks.get(actor, endpointId(request));
    const values = { ...valuesOf(request.body ?? {}), id: endpoint.id };
    try {
      await admin.webhooks.update(actor, endpoint.id, inputOf(values));
    } catch (error) {
      const refused = refusedFields(reply, error, endpointFields, "url");
      if (refused) return form(request, reply, "edit", values, refused.errors, refused.status);
      throw error;
    }
    await addFlash(request, { kind: "success", key: "admin.webhooks.saved", params: { id: endpoint.id } });
    return seeOther(reply, "/admin/webhooks");
  });

  app.get("/admin/webhooks/:id/delete", guarded, async (request, reply) => {
    const endpoint = await admin.webhooks.get(actorOf(request), endpointId(request));
    return adminPage(request, reply, "admin/confirm", {
      title: "admin.webhooks.deleteTitle",
      question: "admin.webhooks.deleteQuestion",
      params: { url: endpoint.url, id: endpoint.id },
      action: `/admin/webhooks/${endpoint.id}/delete`,
      submit: "admin.webhooks.delete",
      back: "/admin/webhooks",
    });
  });

  app.post("/admin/webhooks/:id/delete", posted, async (request, reply) => {
    const actor = actorOf(request);
    const endpoint = await admin.webhooks.get(actor, endpointId(request));
    await admin.webhooks.delete(actor, endpoint.id);
    await addFlash(request, {
      kind: "success",
      key: "admin.webhooks.deleted",
      params: { url: endpoint.url },
    });
    return seeOther(reply, "/admin/webhooks");
  });

  // ---- the delivery log of one endpoint, a delivery's detail, the manual retry

  app.get<{ Querystring: Query }>("/admin/webhooks/:id/deliveries", guarded, async (request, reply) => {
    const actor = actorOf(request);
    const endpoint = await admin.webhooks.get(actor, endpointId(request));
    const status = statuses.find((s) => s === text(request.query.status));
    const type = webhookEvents.find((e) => e === text(request.query.type));
    const page = pageOf(request.query);
    const listing = await admin.webhooks.deliveries(actor, endpoint.id, {
      ...(status ? { status } : {}),
      ...(type ? { type } : {}),
      limit: perPage,
      offset: (page - 1) * perPage,
    });
    const filters = { status: status ?? "", type: type ?? "" };
    return adminPage(request, reply, "admin/webhooks/deliveries", {
      endpoint,
      listing,
      filters,
      statuses,
      events: webhookEvents,
      page,
      ...pageLinks(`/admin/webhooks/${endpoint.id}/deliveries`, filters, {
        page,
        perPage,
        total: listing.total,
      }),
    });
  });

  app.get("/admin/webhook-deliveries/:id", guarded, async (request, reply) => {
    const delivery = await admin.webhooks.delivery(actorOf(request), param(request, "id"));
    const endpoint = await admin.webhooks.get(actorOf(request), delivery.endpointId);
    // The headers of the last attempt (the first, before any), exactly as the worker sends them.
    const headers = webhookRequestHeaders(delivery, Math.max(1, delivery.attempts));
    return adminPage(request, reply, "admin/webhooks/delivery", { delivery, endpoint, headers });
  });

  app.post("/admin/webhook-deliveries/:id/retry", posted, async (request, reply) => {
    const actor = actorOf(request);
    const id = param(request, "id");
    try {
      await admin.webhooks.retry(actor, id);
      await addFlash(request, { kind: "success", key: "admin.webhooks.retried" });
    } catch (error) {
      if (!isRefusal(error, webhookDisabled) && !isRefusal(error, deliveryNotFailed)) throw error;
      await addFlash(request, { kind: "error", ...refusalText(error) });
    }
    return seeOther(reply, `/admin/webhook-deliveries/${encodeURIComponent(id)}`);
  });
}
