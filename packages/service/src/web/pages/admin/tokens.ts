import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  scopes,
  scopesEmpty,
  scopesNotList,
  scopeUnknown,
  tokenNameLength,
  tokenNotFound,
} from "../../../tokens/tokens.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../../context.ts";
import {
  actorOf,
  adminPage,
  adminRoutes,
  type Form,
  param,
  refusedFields,
  text,
  texts,
  wholeNumber,
} from "./common.ts";

/** `/admin/api-tokens…` (admins only): list, create with the plain token shown once, delete after confirming. */
export async function adminTokenPages(app: FastifyInstance, services: WebServices) {
  const { admin } = services;
  const { guarded, posted } = adminRoutes(app);

  const listPage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    values: Record<string, unknown> = {},
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const tokens = await admin.tokens.list(actorOf(request));
    return adminPage(request, reply, "admin/tokens/list", { tokens, scopes, values, errors }, status);
  };

  app.get("/admin/api-tokens", guarded, (request, reply) => listPage(request, reply));

  app.post<{ Body: Form }>("/admin/api-tokens", posted, async (request, reply) => {
    const actor = actorOf(request);
    const name = text(request.body?.name).trim();
    const chosen = texts(request.body?.scopes);
    const values = { name, scopes: chosen };
    const errors: FieldErrors = {};
    if (name === "") errors.name = { key: "form.required" };
    if (chosen.length === 0) errors.scopes = { key: "admin.tokens.scopeMissing" };
    if (Object.keys(errors).length > 0) return listPage(request, reply, values, errors, 422);
    try {
      const created = await admin.tokens.create(actor, name, chosen);
      // The plain token is in this answer only; the database keeps its SHA-256.
      return adminPage(request, reply, "admin/tokens/created", {
        token: created.token,
        plainToken: created.plainToken,
      });
    } catch (error) {
      const refused = refusedFields(
        reply,
        error,
        [
          [tokenNameLength, "name"],
          [scopesNotList, "scopes"],
          [scopeUnknown, "scopes"],
          [scopesEmpty, "scopes"],
        ],
        "name",
      );
      if (refused) return listPage(request, reply, values, refused.errors, refused.status);
      throw error;
    }
  });

  const tokenOf = async (request: FastifyRequest) => {
    const id = wholeNumber(param(request, "id"));
    const token = (await admin.tokens.list(actorOf(request))).find((t) => t.id === id);
    if (!token) throw tokenNotFound();
    return token;
  };

  app.get("/admin/api-tokens/:id/delete", guarded, async (request, reply) => {
    const token = await tokenOf(request);
    return adminPage(request, reply, "admin/confirm", {
      title: "admin.tokens.deleteTitle",
      question: "admin.tokens.deleteQuestion",
      params: { name: token.name },
      action: `/admin/api-tokens/${token.id}/delete`,
      submit: "admin.tokens.delete",
      back: "/admin/api-tokens",
    });
  });

  app.post("/admin/api-tokens/:id/delete", posted, async (request, reply) => {
    const token = await tokenOf(request);
    await admin.tokens.delete(actorOf(request), token.id);
    await addFlash(request, { kind: "success", key: "admin.tokens.deleted", params: { name: token.name } });
    return seeOther(reply, "/admin/api-tokens");
  });
}
