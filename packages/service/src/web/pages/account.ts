import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { PasswordPolicy } from "../../accounts/password-policy.ts";
import { minPasswordLength } from "../../accounts/users.ts";
import { ServiceError } from "../../errors.ts";
import { addFlash, type FieldErrors, isSpam, seeOther, type WebServices } from "../context.ts";
import { signedIn } from "../guards.ts";
import { render } from "../render.ts";
import { clearSessionCookie } from "./sign-in.ts";

type Form = Record<string, string | undefined>;
const text = (value: unknown): string => (typeof value === "string" ? value : "");

/**
 * The new-password rule of every page (password change, registration, recovery, the admin's
 * forms): the service's own check, answered as a field error in the visitor's language.
 */
export async function newPasswordErrors(
  policy: PasswordPolicy,
  password: string,
  repeated: string,
  field = "newPassword",
): Promise<FieldErrors> {
  if (password !== repeated) return { [`${field}Repeat`]: { key: "password.mismatch" } };
  switch (await policy.check(password)) {
    case "too_short":
      return { [field]: { key: "password.weak", params: { min: minPasswordLength } } };
    case "too_long":
      return { [field]: { key: "password.tooLong" } };
    case "compromised":
      return { [field]: { key: "password.compromised" } };
    case null:
      return {};
  }
}

/** `/account` and its settings pages that need nothing but the account itself. */
export async function accountPages(app: FastifyInstance, services: WebServices) {
  const { lifecycle, sessions, settings, signIn } = services;
  const guarded = { preHandler: signedIn };
  const posted = { preHandler: [app.csrfProtection, signedIn] };
  const me = (request: FastifyRequest) => request.web.session!.user;

  app.get("/account", guarded, async (request, reply) => {
    const session = request.web.session!;
    if (isSpam(session)) return render(request, reply, "account/locked");
    return render(request, reply, "account/index", {
      webmailUrl: await settings.get("webmail_url"),
      sessionCount: await sessions.count(session.user.id),
      showVouchers: await services.inviteCodes.mayHaveCodes(session.user),
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
    const errors = await newPasswordErrors(
      services.passwordPolicy,
      next,
      text(request.body?.newPasswordRepeat),
    );
    if (current === "") errors.currentPassword = { key: "form.required" };
    if (Object.keys(errors).length > 0) return passwordForm(request, reply, errors, 422);
    try {
      await lifecycle.changePassword(me(request).email, current, next, {
        keepSessionIdHash: request.web.session!.idHash,
      });
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      if (error.message.startsWith("old password"))
        return passwordForm(request, reply, { currentPassword: { key: "password.wrong" } }, 422);
      if (error.message.includes("identical"))
        return passwordForm(request, reply, { newPassword: { key: "password.identical" } }, 422);
      throw error;
    }
    await addFlash(request, { kind: "success", key: "password.changed" });
    return seeOther(reply, "/account");
  });

  app.get("/account/recovery-token", guarded, (request, reply) =>
    render(request, reply, "account/recovery-token"),
  );

  app.post<{ Body: Form }>("/account/recovery-token", posted, async (request, reply) => {
    const password = text(request.body?.password);
    const retry = (errors: FieldErrors) => render(request, reply, "account/recovery-token", { errors }, 422);
    if (password === "") return retry({ password: { key: "form.required" } });
    let token: string;
    try {
      token = await lifecycle.renewRecoveryToken(me(request).email, password);
    } catch (error) {
      if (error instanceof ServiceError && error.kind === "invalid")
        return retry({ password: { key: "password.wrong" } });
      throw error;
    }
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
    await sessions.endAll(me(request).id);
    clearSessionCookie(request, reply);
    return seeOther(reply, "/login?notice=signedOut");
  });

  app.get("/account/delete", guarded, (request, reply) => render(request, reply, "account/delete"));

  app.post<{ Body: Form }>("/account/delete", posted, async (request, reply) => {
    const password = text(request.body?.password);
    const retry = (errors: FieldErrors) => render(request, reply, "account/delete", { errors }, 422);
    if (password === "") return retry({ password: { key: "form.required" } });
    const user = me(request);
    const check = await signIn.signIn(user.email, password, {
      throttle: { client: request.ip },
      deferActivity: true,
    });
    if (check.kind === "throttled") {
      reply.header("retry-after", String(check.retryAfter));
      return retry({ password: { key: "login.throttled", params: { count: check.retryAfter } } });
    }
    if (check.kind === "unknown" || check.kind === "wrong_password")
      return retry({ password: { key: "password.wrong" } });
    await lifecycle.delete(user.email);
    clearSessionCookie(request, reply);
    return seeOther(reply, "/login?notice=deleted");
  });
}
