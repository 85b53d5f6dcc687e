import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { notPermitted } from "../../../accounts/admin-scope.ts";
import {
  generateInviteCode,
  inviteCodeMalformed,
  inviteCodeNotFound,
  inviteCodeUsed,
  inviteDomainNotManaged,
  inviteOwnerNotActive,
} from "../../../accounts/invite-codes.ts";
import { readSearch } from "../../../accounts/paging.ts";
import { invitationsOffForDomain } from "../../../admin/invitations.ts";
import { isRefusal } from "../../../errors.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../../context.ts";
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
  wholeNumber,
} from "./common.ts";

const perPage = 20;

/** `/admin/invite-codes`: the invite codes of the actor's domains; create (with owner and domain) and delete. */
export async function adminInviteCodePages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  const { guarded, posted } = adminRoutes(app);

  const codesPage = async (
    request: FastifyRequest<{ Querystring: Query }>,
    reply: FastifyReply,
    values: Record<string, string> | null = null,
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const actor = actorOf(request);
    const query = request.query ?? {};
    const statusFilter = ["redeemed", "unredeemed"].includes(text(query.status)) ? text(query.status) : "";
    const domain = wholeNumber(query.domain);
    const filters = {
      search: readSearch(query.search),
      status: statusFilter,
      domain: domain !== undefined && Number.isFinite(domain) ? String(domain) : "",
    };
    const page = pageOf(query);
    const [listing, domains] = await Promise.all([
      admin.inviteCodes.list(
        actor,
        { search: filters.search, limit: perPage, offset: (page - 1) * perPage },
        {
          ...(filters.status ? { status: filters.status as "redeemed" | "unredeemed" } : {}),
          ...(filters.domain ? { domainId: Number(filters.domain) } : {}),
        },
      ),
      admin.domains.choices(actor),
    ]);
    return adminPage(
      request,
      reply,
      "admin/invite-codes",
      {
        listing,
        filters,
        domains,
        values: values ?? { code: generateInviteCode(), domain: domains[0]?.name ?? "", owner: "" },
        errors,
        ...pageLinks("/admin/invite-codes", filters, { page, perPage, total: listing.total }),
      },
      status,
    );
  };

  app.get<{ Querystring: Query }>("/admin/invite-codes", guarded, (request, reply) =>
    codesPage(request, reply),
  );

  app.post<{ Body: Form; Querystring: Query }>("/admin/invite-codes", posted, async (request, reply) => {
    const actor = actorOf(request);
    const body = request.body ?? {};
    const values = {
      code: text(body.code).trim(),
      domain: text(body.domain).trim().toLowerCase(),
      owner: text(body.owner).trim().toLowerCase(),
    };
    if (actor.reach !== "all") values.domain = (await admin.domains.choices(actor))[0]?.name ?? "";
    const errors: FieldErrors = {};
    if (values.owner === "") errors.owner = { key: "form.required" };
    if (Object.keys(errors).length > 0) return codesPage(request, reply, values, errors, 422);
    try {
      const code = await admin.inviteCodes.create(actor, {
        domain: values.domain,
        owner: values.owner,
        code: values.code === "" ? null : values.code,
      });
      await addFlash(request, {
        kind: "success",
        key: "admin.inviteCodes.created",
        params: { code: code.code },
      });
      return seeOther(reply, "/admin/invite-codes");
    } catch (error) {
      if (isRefusal(error, notPermitted))
        return codesPage(request, reply, values, { owner: { key: "admin.aliases.ownerUnknown" } }, 403);
      const refused = refusedFields(
        reply,
        error,
        [
          [invitationsOffForDomain, "domain"],
          [inviteCodeMalformed, "code"],
          [inviteCodeUsed, "code", 422],
          [inviteDomainNotManaged, "domain"],
          [inviteOwnerNotActive, "owner"],
        ],
        "code",
      );
      if (refused) return codesPage(request, reply, values, refused.errors, refused.status);
      throw error;
    }
  });

  app.post("/admin/invite-codes/:id/delete", posted, async (request, reply) => {
    const id = wholeNumber(param(request, "id"));
    if (id === undefined || !Number.isFinite(id)) throw inviteCodeNotFound();
    await admin.inviteCodes.delete(actorOf(request), id);
    await addFlash(request, { kind: "success", key: "admin.inviteCodes.deleted" });
    return seeOther(reply, "/admin/invite-codes");
  });
}
