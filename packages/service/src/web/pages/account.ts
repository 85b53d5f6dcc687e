import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ownerOrigin } from "../../accounts/security-events.ts";
import { formatDateTime } from "../../i18n/dates.ts";
import { addFlash, type FieldErrors, isSpam, seeOther, type WebServices } from "../context.ts";
import { signedIn } from "../guards.ts";
import { confirmPassword, newPasswordFields, repeatErrors } from "../password-confirmation.ts";
import { refusalOnField } from "../refusals.ts";
import { render } from "../render.ts";
import { ownerRow } from "../security-event-texts.ts";
import { pageLinks, pageOf } from "./admin/common.ts";
import { clearSessionCookie } from "./sign-in.ts";

type Form = Record<string, string | undefined>;
const activityPerPage = 50;
const text = (value: unknown): string => (typeof value === "string" ? value : "");

/** `/account` and its settings pages that need nothing but the account itself. */
export async function accountPages(app: FastifyInstance, services: WebServices) {
  const { lifecycle, sessions, settings } = services;
  const guarded = { preHandler: signedIn };
  const posted = { preHandler: [app.csrfProtection, signedIn] };
  const me = (request: FastifyRequest) => request.web.session!.user;
  const origin = (request: FastifyRequest) => ownerOrigin("web", request.ip);

  app.get("/account", guarded, async (request, reply) => {
    const session = request.web.session!;
    if (isSpam(session)) return render(request, reply, "account/locked");
    return render(request, reply, "account/index", {
      webmailUrl: await settings.get("webmail_url"),
      sessionCount: await sessions.count(session.user.id),
      showVouchers: await services.inviteCodes.mayHaveCodes(session.user),
      twoFactorOn: await services.passkeys.twoFactorIsOn(session.user),
    });
  });

  const passwordForm = (
    request: FastifyRequest,
    reply: FastifyReply,
    errors: FieldErrors = {},
    status = 200,
  ) =>
    render(
      request,
      reply,
      "account/password",
      { errors, required: me(request).passwordChangeRequired },
      status,
    );

  app.get("/account/password", guarded, (request, reply) => passwordForm(request, reply));

  app.post<{ Body: Form }>("/account/password", posted, async (request, reply) => {
    const current = text(request.body?.currentPassword);
    const next = text(request.body?.newPassword);
    const errors = repeatErrors(next, text(request.body?.newPasswordRepeat));
    if (current === "") errors.currentPassword = { key: "form.required" };
    if (Object.keys(errors).length > 0) return passwordForm(request, reply, errors, 422);
    const confirmed = await confirmPassword(request, reply, services, current, "currentPassword");
    if ("errors" in confirmed) return passwordForm(request, reply, confirmed.errors, confirmed.status);
    try {
      await lifecycle.changePassword(confirmed.proof, next, origin(request), {
        keepSessionIdHash: request.web.session!.idHash,
      });
    } catch (error) {
      const refused = refusalOnField(reply, error, newPasswordFields("newPassword"));
      if (refused) return passwordForm(request, reply, refused.errors, refused.status);
      throw error;
    }
    await addFlash(request, { kind: "success", key: "password.changed" });
    return seeOther(reply, "/account");
  });

  app.get("/account/recovery-token", guarded, (request, reply) =>
    render(request, reply, "account/recovery-token"),
  );

  app.post<{ Body: Form }>("/account/recovery-token", posted, async (request, reply) => {
    const confirmed = await confirmPassword(request, reply, services, text(request.body?.password));
    if ("errors" in confirmed)
      return render(request, reply, "account/recovery-token", { errors: confirmed.errors }, confirmed.status);
    const token = await lifecycle.renewRecoveryToken(confirmed.proof, origin(request));
    // Shown in this answer only: never in a URL, a log or the session.
    return render(request, reply, "recovery-token-show", { token, action: "/account/recovery-token/ack" });
  });

  app.post<{ Body: Form }>("/account/recovery-token/ack", posted, async (request, reply) => {
    if (request.body?.ack !== "yes") {
      const token = text(request.body?.token);
      const errors: FieldErrors = { ack: { key: "recoveryToken.ackMissing" } };
      return render(
        request,
        reply,
        "recovery-token-show",
        { token, action: "/account/recovery-token/ack", errors },
        422,
      );
    }
    await addFlash(request, { kind: "success", key: "recoveryToken.created" });
    return seeOther(reply, "/account");
  });

  app.get("/account/sessions", guarded, async (request, reply) =>
    render(request, reply, "account/sessions", { sessionCount: await sessions.count(me(request).id) }),
  );

  app.post("/account/sessions/end-all", posted, async (request, reply) => {
    await lifecycle.signOutEverywhere(me(request), origin(request));
    clearSessionCookie(request, reply);
    return seeOther(reply, "/login?notice=signedOut");
  });

  app.get<{ Querystring: Record<string, string | undefined> }>(
    "/account/activity",
    guarded,
    async (request, reply) => {
      const page = pageOf(request.query);
      const [listing, days] = await Promise.all([
        services.securityEvents.forUser(me(request).id, {
          limit: activityPerPage,
          offset: (page - 1) * activityPerPage,
        }),
        settings.get("security_event_days"),
      ]);
      const t = request.web.t;
      return render(request, reply, "account/activity", {
        days,
        total: listing.total,
        events: listing.items.map((event) => ({
          ...ownerRow(t, event),
          when: formatDateTime(request.web.locale, event.at),
        })),
        ...pageLinks("/account/activity", {}, { page, perPage: activityPerPage, total: listing.total }),
      });
    },
  );

  app.get("/account/delete", guarded, (request, reply) => render(request, reply, "account/delete"));

  app.post<{ Body: Form }>("/account/delete", posted, async (request, reply) => {
    const confirmed = await confirmPassword(request, reply, services, text(request.body?.password));
    if ("errors" in confirmed)
      return render(request, reply, "account/delete", { errors: confirmed.errors }, confirmed.status);
    await lifecycle.delete(confirmed.proof.user, origin(request));
    clearSessionCookie(request, reply);
    return seeOther(reply, "/login?notice=deleted");
  });
}
