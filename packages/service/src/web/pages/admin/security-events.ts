import type { FastifyInstance } from "fastify";
import {
  type SecurityEventFilter,
  type SecurityEventRecord,
  securityEventEmailInvalid,
  securityEventTypes,
} from "../../../accounts/security-events.ts";
import type { WebServices } from "../../context.ts";
import { doorText, eventTypeText, eventWhatText, resultText } from "../../security-event-texts.ts";
import {
  actorOf,
  adminArea,
  adminPage,
  dateWindow,
  pageLinks,
  pageOf,
  type Query,
  refusedFields,
  text,
} from "./common.ts";

const perPage = 50;

/**
 * `/admin/security-events`: sign-ins and security changes of the accounts, newest first, with the
 * API's filters (account, event type, dates). A domain admin sees its own domain's accounts only
 * (admin/security-events.ts).
 */
export async function adminSecurityEventPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  app.get<{ Querystring: Query }>(
    "/admin/security-events",
    { preHandler: adminArea },
    async (request, reply) => {
      const actor = actorOf(request);
      const query = request.query;
      const dates = dateWindow(query);
      const filters = {
        email: text(query.email).trim().slice(0, 254),
        type: securityEventTypes.find((type) => type === text(query.type)) ?? "",
        ...dates.typed,
      };
      const { errors } = dates;
      const filter: Omit<SecurityEventFilter, "domainIds" | "userId"> = {
        ...(filters.email ? { email: filters.email } : {}),
        ...(filters.type ? { type: filters.type } : {}),
        ...dates.window,
      };
      const page = pageOf(query);
      const [listing, domains] = await Promise.all([
        admin.securityEvents
          .list(actor, filter, { limit: perPage, offset: (page - 1) * perPage })
          .catch((error: unknown) => {
            const refused = refusedFields(reply, error, [[securityEventEmailInvalid, "email"]], "email");
            if (!refused) throw error;
            Object.assign(errors, refused.errors);
            return { items: [] as SecurityEventRecord[], total: 0 };
          }),
        admin.domains.choices(actor),
      ]);
      const t = request.web.t;
      return adminPage(
        request,
        reply,
        "admin/security-events",
        {
          filters,
          errors,
          types: securityEventTypes.map((type) => ({ value: type, label: eventTypeText(t, type) })),
          domains,
          total: listing.total,
          events: listing.items.map((event) => ({
            at: event.at,
            email: event.email ?? "",
            what: eventWhatText(t, event),
            result: resultText(t, event.result),
            door: doorText(t, event.door),
            clientAddress: event.clientAddress ?? "",
            actor: event.actor ?? "",
            detail: event.detail ? JSON.stringify(event.detail) : "",
          })),
          ...pageLinks("/admin/security-events", filters, { page, perPage, total: listing.total }),
        },
        Object.keys(errors).length > 0 ? 422 : 200,
      );
    },
  );
}
