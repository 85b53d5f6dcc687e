import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  maxAliasNoteLength,
  maxCustomAliases,
  maxRandomAliases,
  ownAliasCharacters,
  ownAliasCustomLimit,
  ownAliasNoteTooLong,
  ownAliasRandomLimit,
  ownAliasSyntax,
  ownAliasTaken,
} from "../../accounts/user-aliases.ts";
import { formatDateTime } from "../../i18n/dates.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../context.ts";
import { notSpam } from "../guards.ts";
import { type RefusalFields, refusalOnField } from "../refusals.ts";
import { render } from "../render.ts";

type Form = Record<string, string | undefined>;
const text = (value: unknown): string => (typeof value === "string" ? value : "");

/** `/account/alias`: the user's random and custom aliases; the rules are UserAliasService's. */
export async function aliasPages(app: FastifyInstance, services: WebServices) {
  const { userAliases } = services;
  const guarded = { preHandler: notSpam };
  const posted = { preHandler: [app.csrfProtection, notSpam] };
  const me = (request: FastifyRequest) => request.web.session!.user;

  const page = async (
    request: FastifyRequest,
    reply: FastifyReply,
    form: { errors?: FieldErrors; values?: Record<string, string> } = {},
    status = 200,
  ) => {
    const own = await userAliases.list(me(request));
    const when = (seconds: number) => formatDateTime(request.web.locale, seconds);
    return render(
      request,
      reply,
      "account/aliases",
      {
        ...own,
        created: when,
        maxRandom: maxRandomAliases,
        maxCustom: maxCustomAliases,
        maxNote: maxAliasNoteLength,
        errors: form.errors ?? {},
        values: form.values ?? {},
      },
      status,
    );
  };

  /** A refusal shown next to the field it concerns, the form filled in again as sent. */
  const refused = (
    request: FastifyRequest,
    reply: FastifyReply,
    error: unknown,
    fields: RefusalFields,
    values: Record<string, string>,
  ) => {
    const onField = refusalOnField(reply, error, fields);
    if (!onField) throw error;
    return page(request, reply, { errors: onField.errors, values }, onField.status);
  };

  app.get("/account/alias", guarded, (request, reply) => page(request, reply));

  app.post<{ Body: Form }>("/account/alias/random", posted, async (request, reply) => {
    const note = text(request.body?.randomNote);
    try {
      const alias = await userAliases.createRandom(me(request), note, { locale: request.web.locale });
      await addFlash(request, {
        kind: "success",
        key: "aliases.createdRandom",
        params: { address: alias.source },
      });
    } catch (error) {
      return refused(
        request,
        reply,
        error,
        [
          [ownAliasNoteTooLong, "randomNote"],
          [ownAliasRandomLimit, "randomNote"],
        ],
        { randomNote: note },
      );
    }
    return seeOther(reply, "/account/alias");
  });

  app.post<{ Body: Form }>("/account/alias/custom", posted, async (request, reply) => {
    const localPart = text(request.body?.localPart);
    const note = text(request.body?.customNote);
    const values = { localPart, customNote: note };
    if (localPart.trim() === "")
      return page(request, reply, { errors: { localPart: { key: "form.required" } }, values }, 422);
    try {
      const alias = await userAliases.createCustom(me(request), localPart, note, {
        locale: request.web.locale,
      });
      await addFlash(request, {
        kind: "success",
        key: "aliases.createdCustom",
        params: { address: alias.source },
      });
    } catch (error) {
      return refused(
        request,
        reply,
        error,
        [
          [ownAliasNoteTooLong, "customNote"],
          [ownAliasCustomLimit, "localPart"],
          [ownAliasCharacters, "localPart"],
          [ownAliasSyntax, "localPart"],
          [ownAliasTaken, "localPart"],
        ],
        values,
      );
    }
    return seeOther(reply, "/account/alias");
  });

  app.post<{ Params: { id: string }; Body: Form }>(
    "/account/alias/delete/:id",
    posted,
    async (request, reply) => {
      const id = /^[1-9][0-9]{0,15}$/.test(request.params.id) ? Number(request.params.id) : Number.NaN;
      try {
        const source = await userAliases.delete(me(request), id);
        await addFlash(request, { kind: "success", key: "aliases.deleted", params: { address: source } });
      } catch (error) {
        return refused(request, reply, error, [], {});
      }
      return seeOther(reply, "/account/alias");
    },
  );
}
