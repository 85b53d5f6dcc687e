import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { notPermitted } from "../../../accounts/admin-scope.ts";
import {
  aliasNotFound,
  destinationInvalid,
  destinationOrOwnerRequired,
  destinationRequired,
  destinationsNotList,
  ownerNotActive,
  tooManyDestinations,
} from "../../../accounts/aliases.ts";
import { readSearch } from "../../../accounts/paging.ts";
import { addressInvalid, addressTaken, domainNotManaged, smtpQuotaInvalid } from "../../../accounts/users.ts";
import { type AliasListFilter, aliasOwnerRequired, smtpQuotaAdminsOnly } from "../../../admin/aliases.ts";
import { isRefusal } from "../../../errors.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../../context.ts";
import type { RefusalFields } from "../../refusals.ts";
import {
  actorOf,
  adminPage,
  adminRoutes,
  cursorOf,
  type Form,
  listUrl,
  param,
  type Query,
  refusedFields,
  segment,
  text,
  wholeNumber,
} from "./common.ts";

const aliasPath = (source: string) => `/admin/aliases/${segment(source)}`;

/** The alias form's refusals from the services, each next to its field. */
const aliasFields: RefusalFields = [
  [addressTaken, "source"],
  [addressInvalid, "source"],
  [domainNotManaged, "source"],
  [ownerNotActive, "owner"],
  [aliasOwnerRequired, "owner"],
  [destinationOrOwnerRequired, "destinations"],
  [destinationRequired, "destinations"],
  [destinationsNotList, "destinations"],
  [tooManyDestinations, "destinations"],
  [destinationInvalid, "destinations"],
  [smtpQuotaAdminsOnly, "smtpPerHour"],
];

/** The SMTP limit fields of a refusal of `smtpQuota.per_hour` or `smtpQuota.per_day`. */
export const smtpQuotaField = (error: unknown): string | null =>
  isRefusal(error, smtpQuotaInvalid)
    ? error.params.field.endsWith("per_day")
      ? "smtpPerDay"
      : "smtpPerHour"
    : null;

/** One address per line (or separated by commas or spaces). */
const addressLines = (value: string): string[] =>
  value
    .split(/[\s,]+/)
    .map((line) => line.trim())
    .filter(Boolean);

/** `/admin/aliases…`: list with search and filters, create, edit and delete. */
export async function adminAliasPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  const { guarded, posted } = adminRoutes(app);

  app.get<{ Querystring: Query }>("/admin/aliases", guarded, async (request, reply) => {
    const actor = actorOf(request);
    const status = ["active", "deleted", "all"].includes(text(request.query.status))
      ? text(request.query.status)
      : "active";
    const domain = wholeNumber(request.query.domain);
    const filters = {
      search: readSearch(request.query.search),
      status,
      domain: domain !== undefined && Number.isFinite(domain) ? String(domain) : "",
    };
    const filter: AliasListFilter = {
      search: filters.search,
      status: status as AliasListFilter["status"],
      ...(filters.domain ? { domainId: Number(filters.domain) } : {}),
    };
    const [page, domains] = await Promise.all([
      admin.aliases.list(actor, filter, cursorOf(request.query)),
      admin.domains.choices(actor),
    ]);
    return adminPage(request, reply, "admin/aliases/list", {
      page,
      filters,
      domains,
      newerUrl: page.newer === null ? null : listUrl("/admin/aliases", filters, { before: page.newer }),
      olderUrl: page.older === null ? null : listUrl("/admin/aliases", filters, { after: page.older }),
      firstUrl: listUrl("/admin/aliases", filters, {}),
      aliasPath,
    });
  });

  const form = async (
    request: FastifyRequest,
    reply: FastifyReply,
    mode: "create" | "edit",
    values: Record<string, string>,
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const actor = actorOf(request);
    const domains = await admin.domains.choices(actor);
    return adminPage(
      request,
      reply,
      "admin/aliases/form",
      {
        mode,
        values,
        errors,
        domains,
        action: mode === "create" ? "/admin/aliases/new" : `${aliasPath(values.source ?? "")}/edit`,
      },
      status,
    );
  };

  const smtpFields = (body: Form, errors: FieldErrors) => {
    const read = (field: string) => {
      const value = wholeNumber(body[field]);
      if (value !== undefined && !Number.isFinite(value)) errors[field] = { key: "admin.wholeNumber" };
      return value !== undefined && Number.isFinite(value) ? value : null;
    };
    return { per_hour: read("smtpPerHour"), per_day: read("smtpPerDay") };
  };

  const valuesOf = (body: Form) => ({
    source: text(body.source).trim().toLowerCase(),
    owner: text(body.owner).trim().toLowerCase(),
    destinations: text(body.destinations),
    smtpPerHour: text(body.smtpPerHour),
    smtpPerDay: text(body.smtpPerDay),
  });

  app.get("/admin/aliases/new", guarded, (request, reply) => form(request, reply, "create", {}));

  app.post<{ Body: Form }>("/admin/aliases/new", posted, async (request, reply) => {
    const actor = actorOf(request);
    const body = request.body ?? {};
    const values = valuesOf(body);
    const errors: FieldErrors = {};
    if (values.source === "") errors.source = { key: "form.required" };
    const smtpQuota = smtpFields(body, errors);
    if (Object.keys(errors).length > 0) return form(request, reply, "create", values, errors, 422);
    const admins = actor.reach === "all";
    try {
      const alias = await admin.aliases.create(actor, {
        source: values.source,
        owner: values.owner === "" ? null : values.owner,
        // Only admins set destinations and limits; a domain admin's alias forwards to its owner.
        ...(admins ? { destinations: addressLines(values.destinations), smtpQuota } : {}),
      });
      await addFlash(request, {
        kind: "success",
        key: "admin.aliases.created",
        params: { source: alias.source },
      });
      return seeOther(reply, "/admin/aliases");
    } catch (error) {
      // Another domain, or an owner the domain admin does not manage: a form error, with a 403.
      if (isRefusal(error, notPermitted))
        return form(
          request,
          reply,
          "create",
          values,
          error.params.subject === "alias"
            ? { source: { key: "admin.aliases.sourceInvalid" } }
            : { owner: { key: "admin.aliases.ownerUnknown" } },
          403,
        );
      const refused = refusedFields(reply, error, aliasFields, smtpQuotaField(error) ?? "source");
      if (refused) return form(request, reply, "create", values, refused.errors, refused.status);
      throw error;
    }
  });

  app.get("/admin/aliases/:source/edit", guarded, async (request, reply) => {
    const alias = await admin.aliases.get(actorOf(request), param(request, "source"));
    if (alias.deleted) throw aliasNotFound();
    return form(request, reply, "edit", {
      source: alias.source,
      owner: alias.owner ?? "",
      destinations: alias.destinations.join("\n"),
      smtpPerHour: alias.smtpQuota.per_hour === null ? "" : String(alias.smtpQuota.per_hour),
      smtpPerDay: alias.smtpQuota.per_day === null ? "" : String(alias.smtpQuota.per_day),
    });
  });

  app.post<{ Body: Form }>("/admin/aliases/:source/edit", posted, async (request, reply) => {
    const actor = actorOf(request);
    const alias = await admin.aliases.get(actor, param(request, "source"));
    const body = request.body ?? {};
    const values = { ...valuesOf(body), source: alias.source };
    const errors: FieldErrors = {};
    const smtpQuota = smtpFields(body, errors);
    if (Object.keys(errors).length > 0) return form(request, reply, "edit", values, errors, 422);
    try {
      await admin.aliases.update(
        actor,
        alias.source,
        actor.reach === "all"
          ? {
              owner: values.owner === "" ? null : values.owner,
              destinations: addressLines(values.destinations),
              smtpQuota,
            }
          : { owner: values.owner === "" ? actor.name : values.owner },
      );
    } catch (error) {
      if (isRefusal(error, notPermitted))
        return form(request, reply, "edit", values, { owner: { key: "admin.aliases.ownerOutside" } }, 403);
      const refused = refusedFields(reply, error, aliasFields, smtpQuotaField(error) ?? "destinations");
      if (refused) return form(request, reply, "edit", values, refused.errors, refused.status);
      throw error;
    }
    await addFlash(request, {
      kind: "success",
      key: "admin.aliases.saved",
      params: { source: alias.source },
    });
    return seeOther(reply, "/admin/aliases");
  });

  app.get("/admin/aliases/:source/delete", guarded, async (request, reply) => {
    const alias = await admin.aliases.get(actorOf(request), param(request, "source"));
    if (alias.deleted) throw aliasNotFound();
    return adminPage(request, reply, "admin/confirm", {
      title: "admin.aliases.deleteTitle",
      question: "admin.aliases.deleteQuestion",
      params: { source: alias.source },
      action: `${aliasPath(alias.source)}/delete`,
      submit: "admin.delete",
      back: "/admin/aliases",
    });
  });

  app.post("/admin/aliases/:source/delete", posted, async (request, reply) => {
    const actor = actorOf(request);
    const alias = await admin.aliases.get(actor, param(request, "source"));
    await admin.aliases.delete(actor, alias.source);
    await addFlash(request, {
      kind: "success",
      key: "admin.aliases.deleted",
      params: { source: alias.source },
    });
    return seeOther(reply, "/admin/aliases");
  });
}
