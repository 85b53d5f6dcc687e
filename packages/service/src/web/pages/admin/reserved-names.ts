import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { readSearch } from "../../../accounts/paging.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../../context.ts";
import { acceptUploads, uploadOf } from "../../uploads.ts";
import {
  actorOf,
  adminArea,
  adminPage,
  adminRoutes,
  type Form,
  pageLinks,
  pageOf,
  param,
  type Query,
  refusedFields,
  text,
} from "./common.ts";

const perPage = 20;
/** The reference's limit of a reserved-names file. */
const maxNamesFileBytes = 1024 * 1024;

/** `/admin/reserved-names` (admins): the names no one may register; create, delete, import from and export to a text file. */
export async function adminReservedNamePages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  const { guarded, posted } = adminRoutes(app);

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
    return adminPage(
      request,
      reply,
      "admin/reserved-names",
      {
        listing,
        search,
        values,
        errors,
        ...pageLinks("/admin/reserved-names", { search }, { page, perPage, total: listing.total }),
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
      const refused = refusedFields(reply, error, [], "name");
      if (refused) return namesPage(request, reply, { name }, refused.errors, refused.status);
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

  // The import takes a file: the multipart parser in a scope of its own.
  await app.register(async (scope) => {
    await acceptUploads(scope, maxNamesFileBytes);

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
  });
}
