import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { generateInviteCode } from "../../../accounts/invite-codes.ts";
import { readSearch } from "../../../accounts/paging.ts";
import { ServiceError } from "../../../errors.ts";
import { maxKeyUploadBodyBytes } from "../../../openpgp/keys.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../../context.ts";
import { acceptUploads, uploadOf } from "../../uploads.ts";
import {
  actorOf,
  adminArea,
  adminPage,
  cursorOf,
  type Form,
  listUrl,
  pageOf,
  param,
  type Query,
  serviceFieldError,
  text,
  wholeNumber,
} from "./common.ts";

const perPage = 20;
/** The reference's limit of a reserved-names file. */
const maxNamesFileBytes = 1024 * 1024;

/**
 * `/admin/invite-codes`, `/admin/reserved-names` and `/admin/openpgp-keys`: the codes of the
 * actor's domains, the reserved names (admins), the published keys with the upload for any
 * address of a domain the actor manages.
 */
export async function adminInvitationPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  const guarded = { preHandler: adminArea };
  const posted = { preHandler: [app.csrfProtection, adminArea] };

  // ---- invite codes

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
    const link = (n: number) => listUrl("/admin/invite-codes", filters, { page: n });
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
        previousUrl: page > 1 ? link(page - 1) : null,
        nextUrl: page * perPage < listing.total ? link(page + 1) : null,
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
      if (
        error instanceof ServiceError &&
        error.kind === "forbidden" &&
        /invitations are off/.test(error.message)
      )
        return codesPage(
          request,
          reply,
          values,
          { domain: { key: "admin.inviteCodes.invitationsOff" } },
          403,
        );
      if (error instanceof ServiceError && error.kind === "forbidden")
        return codesPage(request, reply, values, { owner: { key: "admin.aliases.ownerUnknown" } }, 403);
      const fieldErrors = serviceFieldError(
        error,
        [
          { field: "code", when: /^code:|taken|exists/, key: "admin.inviteCodes.codeInvalid" },
          { field: "domain", when: /^domain:/, key: "admin.users.domainUnknown" },
          { field: "owner", when: /^owner:/, key: "admin.aliases.ownerUnknown" },
        ],
        { field: "code", key: "admin.invalid" },
      );
      if (fieldErrors) return codesPage(request, reply, values, fieldErrors, 422);
      throw error;
    }
  });

  app.post("/admin/invite-codes/:id/delete", posted, async (request, reply) => {
    const id = wholeNumber(param(request, "id"));
    if (id === undefined || !Number.isFinite(id))
      throw new ServiceError("not_found", "invite code not found");
    await admin.inviteCodes.delete(actorOf(request), id);
    await addFlash(request, { kind: "success", key: "admin.inviteCodes.deleted" });
    return seeOther(reply, "/admin/invite-codes");
  });

  // ---- reserved names (admins only)

  const namesPage = async (
    request: FastifyRequest<{ Querystring: Query }>,
    reply: FastifyReply,
    values: Record<string, string> = {},
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const actor = actorOf(request);
    const query = request.query ?? {};
    const search = readSearch(query.search);
    const page = pageOf(query);
    const listing = await admin.reservedNames.list(actor, {
      search,
      limit: perPage,
      offset: (page - 1) * perPage,
    });
    const link = (n: number) => listUrl("/admin/reserved-names", { search }, { page: n });
    return adminPage(
      request,
      reply,
      "admin/reserved-names",
      {
        listing,
        search,
        values,
        errors,
        previousUrl: page > 1 ? link(page - 1) : null,
        nextUrl: page * perPage < listing.total ? link(page + 1) : null,
      },
      status,
    );
  };

  app.get<{ Querystring: Query }>("/admin/reserved-names", guarded, (request, reply) =>
    namesPage(request, reply),
  );

  app.post<{ Body: Form; Querystring: Query }>("/admin/reserved-names", posted, async (request, reply) => {
    const actor = actorOf(request);
    const name = text(request.body?.name).trim().toLowerCase();
    if (name === "") return namesPage(request, reply, { name }, { name: { key: "form.required" } }, 422);
    try {
      await admin.reservedNames.create(actor, name);
    } catch (error) {
      const errors = serviceFieldError(
        error,
        [{ field: "name", when: /already reserved/, key: "admin.reservedNames.exists" }],
        { field: "name", key: "admin.reservedNames.invalid" },
      );
      if (errors)
        return namesPage(
          request,
          reply,
          { name },
          errors,
          error instanceof ServiceError && error.kind === "conflict" ? 409 : 422,
        );
      throw error;
    }
    await addFlash(request, { kind: "success", key: "admin.reservedNames.created", params: { name } });
    return seeOther(reply, "/admin/reserved-names");
  });

  app.post("/admin/reserved-names/:name/delete", posted, async (request, reply) => {
    const name = param(request, "name");
    await admin.reservedNames.delete(actorOf(request), name);
    await addFlash(request, { kind: "success", key: "admin.reservedNames.deleted", params: { name } });
    return seeOther(reply, "/admin/reserved-names");
  });

  app.get("/admin/reserved-names/export", guarded, async (request, reply) => {
    const text = await admin.reservedNames.export(actorOf(request));
    return reply
      .type("text/plain; charset=utf-8")
      .header("content-disposition", 'attachment; filename="reserved_names.txt"')
      .send(text);
  });

  await app.register(async (scope) => {
    await acceptUploads(scope, Math.max(maxNamesFileBytes, maxKeyUploadBodyBytes));

    scope.post<{ Body: Form; Querystring: Query }>(
      "/admin/reserved-names/import",
      { preHandler: [scope.csrfProtection, adminArea] },
      async (request, reply) => {
        const actor = actorOf(request);
        const file = uploadOf(request)?.file ?? null;
        if (!file)
          return namesPage(request, reply, {}, { file: { key: "admin.reservedNames.fileMissing" } }, 422);
        if (file.truncated || file.data.length > maxNamesFileBytes)
          return namesPage(request, reply, {}, { file: { key: "admin.reservedNames.fileTooLarge" } }, 413);
        const result = await admin.reservedNames.import(actor, file.data.toString("utf8"));
        await addFlash(request, {
          kind: "success",
          key: "admin.reservedNames.imported",
          params: { imported: result.imported, skipped: result.skipped, invalid: result.invalid.length },
        });
        return seeOther(reply, "/admin/reserved-names");
      },
    );

    // ---- OpenPGP keys: list, upload for an address of a domain the actor manages, delete

    const keysPage = async (
      request: FastifyRequest<{ Querystring: Query }>,
      reply: FastifyReply,
      values: Record<string, string> = {},
      errors: FieldErrors = {},
      status = 200,
    ) => {
      const actor = actorOf(request);
      const query = request.query ?? {};
      const domain = wholeNumber(query.domain);
      const filters = {
        search: readSearch(query.search),
        domain: domain !== undefined && Number.isFinite(domain) ? String(domain) : "",
      };
      const [page, domains] = await Promise.all([
        admin.openPgpKeys.list(
          actor,
          { search: filters.search, ...(filters.domain ? { domainId: Number(filters.domain) } : {}) },
          cursorOf(query),
        ),
        admin.domains.choices(actor),
      ]);
      return adminPage(
        request,
        reply,
        "admin/openpgp-keys",
        {
          page,
          filters,
          domains,
          values,
          errors,
          newerUrl:
            page.newer === null ? null : listUrl("/admin/openpgp-keys", filters, { before: page.newer }),
          olderUrl:
            page.older === null ? null : listUrl("/admin/openpgp-keys", filters, { after: page.older }),
          firstUrl: listUrl("/admin/openpgp-keys", filters, {}),
        },
        status,
      );
    };

    scope.get<{ Querystring: Query }>("/admin/openpgp-keys", guarded, (request, reply) =>
      keysPage(request, reply),
    );

    scope.post<{ Body: Form; Querystring: Query }>(
      "/admin/openpgp-keys",
      { preHandler: [scope.csrfProtection, adminArea] },
      async (request, reply) => {
        const actor = actorOf(request);
        const email = text(request.body?.email).trim().toLowerCase();
        const keyText = text(request.body?.keyText);
        const file = uploadOf(request)?.file ?? null;
        const values = { email, keyText };
        const errors: FieldErrors = {};
        if (email === "") errors.email = { key: "form.required" };
        if ((file === null) === (keyText.trim() === "")) errors.keyText = { key: "admin.keys.oneOf" };
        if (file?.truncated) errors.keyFile = { key: "admin.keys.tooLarge" };
        if (Object.keys(errors).length > 0) return keysPage(request, reply, values, errors, 422);
        try {
          const info = await admin.openPgpKeys.import(
            actor,
            email,
            file ? new Uint8Array(file.data) : keyText,
          );
          await addFlash(request, {
            kind: "success",
            key: "admin.keys.uploaded",
            params: { email: info.email },
          });
          return seeOther(reply, "/admin/openpgp-keys");
        } catch (error) {
          const fieldErrors = serviceFieldError(
            error,
            [
              { field: "email", when: /^email:/, key: "admin.keys.addressUnknown" },
              { field: "keyText", when: /no OpenPGP data/, key: "admin.keys.noData" },
              { field: "keyText", when: /larger than/, key: "admin.keys.tooLarge" },
              { field: "keyText", when: /^No key found/, key: "admin.keys.noKey" },
              { field: "keyText", when: /^More than one/, key: "admin.keys.severalKeys" },
            ],
            { field: "keyText", key: "admin.invalid" },
          );
          if (fieldErrors) return keysPage(request, reply, values, fieldErrors, 422);
          throw error;
        }
      },
    );

    scope.post(
      "/admin/openpgp-keys/:email/delete",
      { preHandler: [scope.csrfProtection, adminArea] },
      async (request, reply) => {
        const info = await admin.openPgpKeys.delete(actorOf(request), param(request, "email"));
        await addFlash(request, {
          kind: "success",
          key: "admin.keys.deleted",
          params: { email: info.email },
        });
        return seeOther(reply, "/admin/openpgp-keys");
      },
    );
  });
}
