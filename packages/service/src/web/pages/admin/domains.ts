import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { domainNotEmpty, domainNotFound, numberOutOfRange } from "../../../accounts/domains.ts";
import { readSearch } from "../../../accounts/paging.ts";
import { domainHoldsOwnAccount } from "../../../admin/domains.ts";
import { isRefusal } from "../../../errors.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../../context.ts";
import { confirmPassword } from "../../password-confirmation.ts";
import { refusalOnField } from "../../refusals.ts";
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
  segment,
  text,
} from "./common.ts";

const domainPath = (name: string) => `/admin/domains/${segment(name)}`;
const perPage = 20;

/**
 * `/admin/domains…`: admins list, create and delete domains; a domain admin has its own domain's
 * page (`/admin/domain`) with the invitation settings, and a 403 everywhere else.
 */
export async function adminDomainPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  const { guarded, posted } = adminRoutes(app);

  const listPage = async (
    request: FastifyRequest<{ Querystring: Query }>,
    reply: FastifyReply,
    values: Record<string, string> = {},
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const actor = actorOf(request);
    const search = readSearch(request.query?.search);
    const page = pageOf(request.query ?? {});
    const listing = await admin.domains.list(actor, { search, limit: perPage, offset: (page - 1) * perPage });
    return adminPage(
      request,
      reply,
      "admin/domains/list",
      {
        listing,
        search,
        values,
        errors,
        domainPath,
        ...pageLinks("/admin/domains", { search }, { page, perPage, total: listing.total }),
        page,
      },
      status,
    );
  };

  app.get<{ Querystring: Query }>("/admin/domains", guarded, (request, reply) => listPage(request, reply));

  app.post<{ Body: Form; Querystring: Query }>("/admin/domains", posted, async (request, reply) => {
    const actor = actorOf(request);
    const name = text(request.body?.name).trim().toLowerCase();
    if (name === "") return listPage(request, reply, { name }, { name: { key: "form.required" } }, 422);
    try {
      const domain = await admin.domains.create(actor, name);
      await addFlash(request, {
        kind: "success",
        key: "admin.domains.created",
        params: { name: domain.name },
      });
      return seeOther(reply, domainPath(domain.name));
    } catch (error) {
      const refused = refusedFields(reply, error, [], "name");
      if (refused) return listPage(request, reply, { name }, refused.errors, refused.status);
      throw error;
    }
  });

  // A domain admin's own domain; an admin's too (the domain of its account).
  app.get("/admin/domain", guarded, async (request, reply) => {
    const actor = actorOf(request);
    const [own] = await admin.domains.choices({ ...actor, reach: "domain" });
    if (!own) throw domainNotFound();
    return seeOther(reply, domainPath(own.name));
  });

  const showPage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    errors: FieldErrors = {},
    values: Record<string, unknown> | null = null,
    status = 200,
  ) => {
    const facts = await admin.domains.facts(actorOf(request), param(request, "name"));
    return adminPage(
      request,
      reply,
      "admin/domains/show",
      {
        facts,
        errors,
        values: values ?? {
          invitationEnabled: facts.invitations.enabled,
          invitationLimit: String(facts.invitations.limit),
          waitingPeriodDays: String(facts.invitations.waitingPeriodDays),
        },
        action: `${domainPath(facts.domain.name)}/invitations`,
        domainPath,
      },
      status,
    );
  };

  app.get("/admin/domains/:name", guarded, (request, reply) => showPage(request, reply));

  app.post<{ Body: Form }>("/admin/domains/:name/invitations", posted, async (request, reply) => {
    const actor = actorOf(request);
    const domain = await admin.domains.get(actor, param(request, "name"));
    const body = request.body ?? {};
    const values = {
      invitationEnabled: text(body.invitationEnabled) === "yes",
      invitationLimit: text(body.invitationLimit).trim(),
      waitingPeriodDays: text(body.waitingPeriodDays).trim(),
    };
    try {
      await admin.domains.updateInvitations(actor, domain.name, {
        enabled: values.invitationEnabled,
        limit: values.invitationLimit,
        waitingPeriodDays: values.waitingPeriodDays,
      });
    } catch (error) {
      const field =
        isRefusal(error, numberOutOfRange) && error.params.field === "waitingPeriodDays"
          ? "waitingPeriodDays"
          : "invitationLimit";
      const refused = refusedFields(reply, error, [], field);
      if (refused) return showPage(request, reply, refused.errors, values, refused.status);
      throw error;
    }
    await addFlash(request, { kind: "success", key: "admin.domains.saved", params: { name: domain.name } });
    return seeOther(reply, domainPath(domain.name));
  });

  app.post<{ Body: Form }>("/admin/domains/:name/app-passwords", posted, async (request, reply) => {
    const actor = actorOf(request);
    const domain = await admin.domains.get(actor, param(request, "name"));
    await admin.domains.updateAppPasswordsRequired(
      actor,
      domain.name,
      text(request.body?.appPasswordsRequired) === "yes",
    );
    await addFlash(request, { kind: "success", key: "admin.domains.saved", params: { name: domain.name } });
    return seeOther(reply, domainPath(domain.name));
  });

  // ---- delete: the counts of what goes with it, the force path, the admin's password

  const deletePage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const actor = actorOf(request);
    const facts = await admin.domains.facts(actor, param(request, "name"));
    // Only admins reach this (the service refuses anyone else); asked first so a domain admin sees 403.
    await admin.domains.list(actor, { search: "", limit: 1, offset: 0 });
    const holds = facts.activeUsers > 0 || facts.activeAliases > 0;
    const params = { name: facts.domain.name, users: facts.activeUsers, aliases: facts.activeAliases };
    return adminPage(
      request,
      reply,
      "admin/confirm",
      {
        title: "admin.domains.deleteTitle",
        question: holds ? "admin.domains.deleteQuestionForce" : "admin.domains.deleteQuestion",
        params,
        details: [
          { key: "admin.domains.countUsers", params: { n: facts.activeUsers } },
          { key: "admin.domains.countAliases", params: { n: facts.activeAliases } },
          {
            key: "admin.domains.countInviteCodes",
            params: { n: facts.inviteCodes.unredeemed + facts.inviteCodes.redeemed },
          },
          { key: "admin.domains.countKeys", params: { n: facts.openPgpKeys } },
        ],
        force: holds ? "admin.domains.force" : null,
        askPassword: true,
        action: `${domainPath(facts.domain.name)}/delete`,
        submit: "admin.domains.delete",
        back: domainPath(facts.domain.name),
        errors,
      },
      status,
    );
  };

  app.get("/admin/domains/:name/delete", guarded, (request, reply) => deletePage(request, reply));

  app.post<{ Body: Form }>("/admin/domains/:name/delete", posted, async (request, reply) => {
    const actor = actorOf(request);
    const domain = await admin.domains.get(actor, param(request, "name"));
    await admin.domains.list(actor, { search: "", limit: 1, offset: 0 });
    const confirmed = await confirmPassword(request, reply, services, text(request.body?.password));
    if ("errors" in confirmed) return deletePage(request, reply, confirmed.errors, confirmed.status);
    const force = text(request.body?.force) === "yes";
    try {
      await admin.domains.delete(actor, domain.name, force);
    } catch (error) {
      const refused = refusalOnField(reply, error, [
        [domainHoldsOwnAccount, "form"],
        [domainNotEmpty, "force"],
      ]);
      if (refused) return deletePage(request, reply, refused.errors, refused.status);
      throw error;
    }
    await addFlash(request, { kind: "success", key: "admin.domains.deleted", params: { name: domain.name } });
    return seeOther(reply, "/admin/domains");
  });
}
