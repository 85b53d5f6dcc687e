import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { readSearch } from "../../../accounts/paging.ts";
import type { AliasListFilter } from "../../../admin/aliases.ts";
import { ServiceError } from "../../../errors.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../../context.ts";
import {
  actorOf,
  adminArea,
  adminPage,
  cursorOf,
  type Form,
  listUrl,
  param,
  type Query,
  segment,
  serviceFieldError,
  text,
  wholeNumber,
} from "./common.ts";
import { statusOf } from "./users.ts";

const aliasPath = (source: string) => `/admin/aliases/${segment(source)}`;

const aliasErrorRules = [
  { field: "source", when: /already taken/, key: "admin.aliases.sourceTaken" as const },
  { field: "source", when: /^source:/, key: "admin.aliases.sourceInvalid" as const },
  { field: "owner", when: /^owner:/, key: "admin.aliases.ownerUnknown" as const },
  {
    field: "destinations",
    when: /^destinations: at least/,
    key: "admin.aliases.destinationsMissing" as const,
  },
  { field: "destinations", when: /^destinations:/, key: "admin.aliases.destinationInvalid" as const },
  { field: "smtpPerHour", when: /^smtpQuota\.per_hour/, key: "admin.wholeNumber" as const },
  { field: "smtpPerDay", when: /^smtpQuota\.per_day/, key: "admin.wholeNumber" as const },
];

/** One address per line (or separated by commas or spaces). */
const addressLines = (value: string): string[] =>
  value
    .split(/[\s,]+/)
    .map((line) => line.trim())
    .filter(Boolean);

/** `/admin/aliases…`: list with search and filters, create, edit and delete. */
export async function adminAliasPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  const guarded = { preHandler: adminArea };
  const posted = { preHandler: [app.csrfProtection, adminArea] };

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
      if (error instanceof ServiceError && error.kind === "forbidden")
        return form(
          request,
          reply,
          "create",
          values,
          /this alias$/.test(error.message)
            ? { source: { key: "admin.aliases.sourceInvalid" } }
            : { owner: { key: "admin.aliases.ownerUnknown" } },
          403,
        );
      const fieldErrors = serviceFieldError(error, aliasErrorRules, {
        field: "source",
        key: "admin.invalid",
      });
      if (fieldErrors) return form(request, reply, "create", values, fieldErrors, statusOf(error));
      throw error;
    }
  });

  app.get("/admin/aliases/:source/edit", guarded, async (request, reply) => {
    const alias = await admin.aliases.get(actorOf(request), param(request, "source"));
    if (alias.deleted) throw new ServiceError("not_found", "alias not found");
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
      if (error instanceof ServiceError && error.kind === "forbidden")
        return form(request, reply, "edit", values, { owner: { key: "admin.aliases.ownerOutside" } }, 403);
      const fieldErrors = serviceFieldError(error, aliasErrorRules, {
        field: "destinations",
        key: "admin.invalid",
      });
      if (fieldErrors) return form(request, reply, "edit", values, fieldErrors, statusOf(error));
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
    if (alias.deleted) throw new ServiceError("not_found", "alias not found");
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
