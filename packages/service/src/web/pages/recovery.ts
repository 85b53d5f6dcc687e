import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { parseAddress } from "../../accounts/addresses.ts";
import { normalizeRecoveryToken } from "../../credentials/mailcrypt.ts";
import type { MessageKey } from "../../i18n/catalogue.ts";
import { formatDateTime } from "../../i18n/dates.ts";
import { type FieldErrors, seeOther, type WebServices } from "../context.ts";
import { newPasswordFields, repeatErrors } from "../password-confirmation.ts";
import { refusalOnField } from "../refusals.ts";
import { render } from "../render.ts";

type Form = Record<string, string | undefined>;
const text = (value: unknown): string => (typeof value === "string" ? value : "");

interface Notice {
  key: MessageKey;
  params?: Record<string, string | number>;
}

/**
 * `/recovery` (public): address and recovery token, the waiting period, then a new password.
 * Address and token travel only in POSTed forms (never a URL: the reference's weakness 7); the
 * rule itself is RecoveryService's, and every step re-checks it there.
 */
export async function recoveryPages(app: FastifyInstance, services: WebServices) {
  const { recovery, mail } = services;

  const startForm = (
    request: FastifyRequest,
    reply: FastifyReply,
    options: { values?: Form; errors?: FieldErrors; notice?: Notice; status?: number } = {},
  ) =>
    render(
      request,
      reply,
      "recovery/start",
      { values: options.values ?? {}, errors: options.errors ?? {}, notice: options.notice ?? null },
      options.status ?? 200,
    );

  const throttled = (request: FastifyRequest, reply: FastifyReply, email: string, retryAfter: number) => {
    reply.header("retry-after", String(retryAfter));
    return startForm(request, reply, {
      values: { email },
      notice: { key: "recovery.throttled", params: { count: retryAfter } },
      status: 429,
    });
  };

  const resetForm = (
    request: FastifyRequest,
    reply: FastifyReply,
    input: { email: string; token: string; expiresAt?: number; errors?: FieldErrors; status?: number },
  ) =>
    render(
      request,
      reply,
      "recovery/reset",
      {
        email: input.email,
        token: input.token,
        expiresAt: input.expiresAt ? formatDateTime(request.web.locale, input.expiresAt) : "",
        errors: input.errors ?? {},
      },
      input.status ?? 200,
    );

  app.get("/recovery", (request, reply) => startForm(request, reply));

  app.post<{ Body: Form }>("/recovery", { preHandler: app.csrfProtection }, async (request, reply) => {
    const email = text(request.body?.email).trim();
    const rawToken = text(request.body?.token);
    const errors: FieldErrors = {};
    // A full address: a bare local part is refused, as in the reference.
    if (email === "") errors.email = { key: "form.required" };
    else if (!email.includes("@") || !parseAddress(email)) errors.email = { key: "recovery.emailInvalid" };
    const token = normalizeRecoveryToken(rawToken);
    if (rawToken.trim() === "") errors.token = { key: "form.required" };
    else if (token === null) errors.token = { key: "recovery.tokenInvalid" };
    if (Object.keys(errors).length > 0 || token === null)
      return startForm(request, reply, { values: { email }, errors, status: 422 });
    const result = await recovery.check(email, token, { client: request.ip, locale: request.web.locale });
    switch (result.kind) {
      case "throttled":
        return throttled(request, reply, email, result.retryAfter);
      case "wrong":
        return startForm(request, reply, {
          values: { email },
          notice: { key: "recovery.wrong" },
          status: 401,
        });
      case "waiting":
        return render(request, reply, "recovery/waiting", {
          email,
          activeFrom: formatDateTime(request.web.locale, result.activeFrom),
          mailed: result.started && mail.enabled,
        });
      case "ready":
        return resetForm(request, reply, { email, token, expiresAt: result.expiresAt });
    }
  });

  app.post<{ Body: Form }>("/recovery/reset", { preHandler: app.csrfProtection }, async (request, reply) => {
    const email = text(request.body?.email).trim();
    const token = normalizeRecoveryToken(text(request.body?.token));
    if (!parseAddress(email) || token === null)
      return startForm(request, reply, { values: { email }, notice: { key: "recovery.wrong" }, status: 400 });
    const password = text(request.body?.newPassword);
    const errors = repeatErrors(password, text(request.body?.newPasswordRepeat));
    if (Object.keys(errors).length > 0)
      return resetForm(request, reply, { email, token, errors, status: 422 });
    let result: Awaited<ReturnType<typeof recovery.complete>>;
    try {
      result = await recovery.complete(email, token, password, { client: request.ip });
    } catch (error) {
      const refused = refusalOnField(reply, error, newPasswordFields("newPassword"));
      if (!refused) throw error;
      return resetForm(request, reply, { email, token, errors: refused.errors, status: refused.status });
    }
    switch (result.kind) {
      case "throttled":
        return throttled(request, reply, email, result.retryAfter);
      case "wrong":
        return startForm(request, reply, {
          values: { email },
          notice: { key: "recovery.wrong" },
          status: 401,
        });
      case "expired":
        return startForm(request, reply, {
          values: { email },
          notice: { key: "recovery.expired" },
          status: 409,
        });
      case "waiting":
        return render(
          request,
          reply,
          "recovery/waiting",
          { email, activeFrom: formatDateTime(request.web.locale, result.activeFrom), mailed: false },
          409,
        );
      case "done":
        // Shown in this answer only: never in a URL, a log or a session.
        return render(request, reply, "recovery-token-show", {
          token: result.recoveryToken,
          action: "/recovery/ack",
        });
    }
  });

  app.post<{ Body: Form }>("/recovery/ack", { preHandler: app.csrfProtection }, async (request, reply) => {
    if (request.body?.ack !== "yes") {
      const token = normalizeRecoveryToken(text(request.body?.token)) ?? "";
      const errors: FieldErrors = { ack: { key: "recoveryToken.ackMissing" } };
      return render(request, reply, "recovery-token-show", { token, action: "/recovery/ack", errors }, 422);
    }
    return seeOther(reply, "/recovery/done");
  });

  app.get("/recovery/done", (request, reply) => render(request, reply, "recovery/done"));
}
