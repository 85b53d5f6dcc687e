import type { FastifyInstance } from "fastify";
import { type AuditFilter, auditActions } from "../../../accounts/audit-log.ts";
import { readSearch } from "../../../accounts/paging.ts";
import type { WebServices } from "../../context.ts";
import {
  actorOf,
  adminArea,
  adminPage,
  dateWindow,
  pageLinks,
  pageOf,
  type Query,
  text,
  wholeNumber,
} from "./common.ts";

const perPage = 50;

/**
 * `/admin/audit-log`: who changed what, when and from where, newest first, with filters. A domain
 * admin sees its own domain's entries (the audit log's own rule).
 */
export async function adminAuditLogPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  app.get<{ Querystring: Query }>("/admin/audit-log", { preHandler: adminArea }, async (request, reply) => {
    const actor = actorOf(request);
    const query = request.query;
    const dates = dateWindow(query);
    const filters = {
      actor: readSearch(query.actor),
      action: auditActions.find((a) => a === text(query.action)) ?? "",
      target: readSearch(query.target),
      domain: "",
      ...dates.typed,
    };
    const domainId = wholeNumber(query.domain);
    if (domainId !== undefined && Number.isFinite(domainId)) filters.domain = String(domainId);
    const { errors } = dates;
    const filter: AuditFilter = {
      ...(filters.actor ? { actor: filters.actor } : {}),
      ...(filters.action ? { action: filters.action } : {}),
      ...(filters.target ? { target: filters.target } : {}),
      ...(filters.domain ? { domainId: Number(filters.domain) } : {}),
      ...dates.window,
    };
    const page = pageOf(query);
    const [listing, domains] = await Promise.all([
      admin.auditLog.list(actor, filter, { limit: perPage, offset: (page - 1) * perPage }),
      admin.domains.choices(actor),
    ]);
    return adminPage(
      request,
      reply,
      "admin/audit-log",
      {
        listing,
        filters,
        errors,
        actions: auditActions,
        domains,
        page,
        ...pageLinks("/admin/audit-log", filters, { page, perPage, total: listing.total }),
        detailText: (detail: Record<string, unknown> | null) => (detail ? JSON.stringify(detail) : ""),
      },
      Object.keys(errors).length > 0 ? 422 : 200,
    );
  });
}
