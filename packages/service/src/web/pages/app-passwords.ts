import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  appPasswordLimitReached,
  appPasswordNameInvalid,
  appPasswordScopeInvalid,
  appPasswordScopes,
  validName,
  validScope,
} from "../../accounts/app-passwords.ts";
import { ownerOrigin } from "../../accounts/security-events.ts";
import { groupedAppPassword, normalizeAppPassword } from "../../credentials/app-passwords.ts";
import { formatDateTime, formatDay } from "../../i18n/dates.ts";
import { addFlash, type FieldErrors, pathId, seeOther, type WebServices } from "../context.ts";
import { signedIn } from "../guards.ts";
import { confirmPassword } from "../password-confirmation.ts";
import { type RefusalFields, refusalOnField } from "../refusals.ts";
import { render } from "../render.ts";

type Form = Record<string, string | undefined>;
const text = (value: unknown): string => (typeof value === "string" ? value : "");
const page = "/account/app-passwords";

/** The service's refusals of a new app password, each next to its field. */
const createFields: RefusalFields = [
  [appPasswordNameInvalid, "name"],
  [appPasswordScopeInvalid, "scope"],
  [appPasswordLimitReached, "name"],
];

/**
 * `/account/app-passwords`: create one (re-confirmed with the account password, which opens the
 * MailCrypt key to seal again under the app password), shown once with an acknowledgement; the
 * list with "Revoke"; the switch "mail apps must use app passwords". The rules are
 * AppPasswordService's; a revocation names the signed-in user, so another's id is not found.
 */
export async function appPasswordPages(app: FastifyInstance, services: WebServices) {
  const { appPasswords } = services;
  const guarded = { preHandler: signedIn };
  const posted = { preHandler: [app.csrfProtection, signedIn] };
  const me = (request: FastifyRequest) => request.web.session!.user;
  const origin = (request: FastifyRequest) => ownerOrigin("web", request.ip);

  const overview = async (
    request: FastifyRequest,
    reply: FastifyReply,
    values: { name?: string; scope?: string } = {},
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const { locale } = request.web;
    const [list, required] = await Promise.all([
      appPasswords.list(me(request)),
      appPasswords.required(me(request)),
    ]);
    return render(
      request,
      reply,
      "account/app-passwords",
      {
        items: list.map((item) => ({
          ...item,
          created: formatDateTime(locale, item.createdAt),
          lastUsed:
            item.lastUsedAt === null
              ? null
              : { day: formatDay(locale, item.lastUsedAt), address: item.lastUsedAddress ?? "" },
        })),
        required,
        scopes: appPasswordScopes,
        values: { name: values.name ?? "", scope: values.scope ?? "mail" },
        errors,
      },
      status,
    );
  };

  app.get(page, guarded, (request, reply) => overview(request, reply));

  app.post<{ Body: Form }>(page, posted, async (request, reply) => {
    const body = request.body ?? {};
    const values = { name: text(body.name), scope: text(body.scope) };
    // The name and scope first: a form with a bad name costs no password check (and no guard count).
    const errors: FieldErrors = {};
    try {
      validName(values.name);
    } catch {
      errors.name = { key: "refusal.app_password.name_invalid" };
    }
    try {
      validScope(values.scope);
    } catch {
      errors.scope = { key: "refusal.app_password.scope_invalid" };
    }
    if (text(body.password) === "") errors.password = { key: "form.required" };
    if (Object.keys(errors).length > 0) return overview(request, reply, values, errors, 422);
    const confirmed = await confirmPassword(request, reply, services, text(body.password));
    if ("errors" in confirmed) return overview(request, reply, values, confirmed.errors, confirmed.status);
    let made: Awaited<ReturnType<typeof appPasswords.createForOwner>>;
    try {
      made = await appPasswords.createForOwner(confirmed.proof, values, origin(request));
    } catch (error) {
      const refused = refusalOnField(reply, error, createFields);
      if (refused) return overview(request, reply, values, refused.errors, refused.status);
      throw error;
    }
    // Shown in this answer only (and posted back with the acknowledgement): never in a URL, a log or the session.
    return render(request, reply, "account/app-password-show", { password: made.password, name: made.name });
  });

  app.post<{ Body: Form }>(`${page}/ack`, posted, async (request, reply) => {
    const body = request.body ?? {};
    const name = text(body.name).slice(0, 64);
    if (body.ack !== "yes") {
      // Only a value of the app-password form is shown again, in its grouped form.
      const normalized = normalizeAppPassword(text(body.password));
      const password = normalized === null ? "" : groupedAppPassword(normalized);
      const errors: FieldErrors = { ack: { key: "appPasswords.ackMissing" } };
      return render(request, reply, "account/app-password-show", { password, name, errors }, 422);
    }
    await addFlash(request, { kind: "success", key: "appPasswords.created", params: { name } });
    return seeOther(reply, page);
  });

  app.post<{ Params: { id: string } }>(`${page}/:id/revoke`, posted, async (request, reply) => {
    const id = pathId(request.params.id);
    const name = (await appPasswords.list(me(request))).find((item) => item.id === id)?.name ?? "";
    // Not the user's (or no such id): the service refuses with 404, and nothing changes.
    await appPasswords.revoke(me(request), id, origin(request));
    await addFlash(request, { kind: "success", key: "appPasswords.revoked", params: { name } });
    return seeOther(reply, page);
  });

  app.post<{ Body: Form }>(`${page}/required`, posted, async (request, reply) => {
    const required = request.body?.required === "yes";
    await appPasswords.setRequired(me(request), required, origin(request));
    await addFlash(request, {
      kind: "success",
      key: required ? "appPasswords.requiredOn" : "appPasswords.requiredOff",
    });
    return seeOther(reply, page);
  });
}
