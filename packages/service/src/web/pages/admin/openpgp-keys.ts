import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { readSearch } from "../../../accounts/paging.ts";
import { domainNotManaged } from "../../../accounts/users.ts";
import { keyAddressInvalid, keyAddressNotHeld, maxKeyUploadBodyBytes } from "../../../openpgp/keys.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../../context.ts";
import { acceptUploads, uploadOf } from "../../uploads.ts";
import {
  actorOf,
  adminArea,
  adminPage,
  adminRoutes,
  cursorOf,
  type Form,
  listUrl,
  param,
  type Query,
  refusedFields,
  text,
  wholeNumber,
} from "./common.ts";

/**
 * `/admin/openpgp-keys`: the published keys of the actor's domains; upload (a key file or the
 * pasted key) for any address of a domain the actor manages, delete.
 */
export async function adminOpenPgpKeyPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  const { guarded } = adminRoutes(app);

  // The upload takes a file: the multipart parser in a scope of its own.
  await app.register(async (scope) => {
    await acceptUploads(scope, maxKeyUploadBodyBytes);

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
          const refused = refusedFields(
            reply,
            error,
            [
              [keyAddressInvalid, "email"],
              [domainNotManaged, "email"],
              [keyAddressNotHeld, "email"],
            ],
            "keyText",
          );
          if (refused) return keysPage(request, reply, values, refused.errors, 422);
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
