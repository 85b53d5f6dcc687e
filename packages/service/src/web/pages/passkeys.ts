import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { type PasskeyCheck, passkeyNameInvalid, passkeyNone } from "../../accounts/passkeys.ts";
import { ownerOrigin } from "../../accounts/security-events.ts";
import { passwordWrong, signInThrottled } from "../../accounts/sign-in.ts";
import { ServiceError, statusOfKind } from "../../errors.ts";
import { formatDateTime } from "../../i18n/dates.ts";
import { addFlash, type FieldErrors, pathId, seeOther, type WebServices } from "../context.ts";
import { signedIn } from "../guards.ts";
import { webOrigin } from "../origin.ts";
import { confirmPassword } from "../password-confirmation.ts";
import { refusalText, retryAfterHeader } from "../refusals.ts";
import { render } from "../render.ts";
import { completeSignIn, setSessionCookie } from "./sign-in.ts";

type Body = Record<string, unknown> | undefined;
const text = (value: unknown): string => (typeof value === "string" ? value : "");

/**
 * `/account/passkeys` and the passkey ceremonies of `/login` and `/2fa`. The browser's side is
 * static/passkeys.js (no inline script): it asks one of the JSON endpoints below for the options,
 * lets the browser make or use the passkey, and posts the answer back; each endpoint takes the
 * page's CSRF token (header `csrf-token`) and answers `{ redirect }` or `{ error, message, field? }`.
 */
export async function passkeyPages(app: FastifyInstance, services: WebServices) {
  const { passkeys, sessions } = services;
  const guarded = { preHandler: signedIn };
  const posted = { preHandler: [app.csrfProtection, signedIn] };

  /** A JSON refusal in the reader's language; `field` names the form field it belongs to. */
  const refuse = (reply: FastifyReply, request: FastifyRequest, error: unknown, field?: string) => {
    if (!(error instanceof ServiceError)) throw error;
    retryAfterHeader(reply, error);
    const { key, params } = refusalText(error);
    return reply
      .code(statusOfKind[error.kind])
      .send({ error: error.code, message: request.web.t(key, params), ...(field ? { field } : {}) });
  };
  const failed = (
    reply: FastifyReply,
    request: FastifyRequest,
    status: number,
    key: "passkeys.signInFailed",
  ) => reply.code(status).send({ error: "passkey.failed", message: request.web.t(key) });

  /** JSON endpoints of a signed-in user: no redirect to a page, a 401 the script shows. */
  const jsonSignedIn = async (request: FastifyRequest, reply: FastifyReply) => {
    const session = request.web.session;
    if (session?.stage !== "signed_in" || session.user.passwordChangeRequired)
      return reply.code(401).send({ error: "session.required", message: request.web.t("error.forbidden") });
  };
  const json = { preHandler: [app.csrfProtection, jsonSignedIn] };

  const overview = async (
    request: FastifyRequest,
    reply: FastifyReply,
    errors: FieldErrors = {},
    status = 200,
  ) => {
    const { user } = request.web.session!;
    const { locale } = request.web;
    const list = await passkeys.list(user);
    return render(
      request,
      reply,
      "account/passkeys",
      {
        errors,
        passkeyScript: true,
        passkeys: list.map((p) => ({
          ...p,
          created: formatDateTime(locale, p.createdAt),
          lastUsed: p.lastUsedAt === null ? "" : formatDateTime(locale, p.lastUsedAt),
        })),
        signInAllowed: await passkeys.signInAllowed(user),
        // IMAP and SMTP take no second factor: with one, point to "mail apps must use app passwords".
        mailAppsUsePassword: list.length > 0 && !(await services.appPasswords.required(user)),
      },
      status,
    );
  };

  app.get("/account/passkeys", guarded, (request, reply) => overview(request, reply));

  // Registration, step 1: the password re-confirmed and the name checked, then the options.
  app.post<{ Body: Body }>("/account/passkeys/options", json, async (request, reply) => {
    try {
      passkeys.checkName(request.body?.name);
    } catch (error) {
      return refuse(reply, request, error, "name");
    }
    const password = text(request.body?.password);
    if (password === "")
      return reply
        .code(422)
        .send({ error: "form.required", message: request.web.t("form.required"), field: "password" });
    try {
      const proof = await services.signIn.confirmPassword(
        request.web.session!.user,
        password,
        webOrigin(request, reply),
      );
      return { options: await passkeys.registrationOptions(proof) };
    } catch (error) {
      const onPassword =
        error instanceof ServiceError && (error.is(passwordWrong) || error.is(signInThrottled));
      return refuse(reply, request, error, onPassword ? "password" : undefined);
    }
  });

  // Registration, step 2: the browser's answer.
  app.post<{ Body: Body }>("/account/passkeys", json, async (request, reply) => {
    const session = request.web.session!;
    try {
      const hadSecondFactor = await passkeys.twoFactorIsOn(session.user);
      const passkey = await passkeys.register(
        session.user,
        request.body?.response,
        request.body?.name,
        ownerOrigin("web", request.ip),
        { keepSessionIdHash: session.idHash },
      );
      await addFlash(request, {
        kind: "success",
        key: hadSecondFactor ? "passkeys.added" : "passkeys.addedFirst",
        params: { name: passkey.name },
      });
      return { redirect: "/account/passkeys" };
    } catch (error) {
      return refuse(
        reply,
        request,
        error,
        error instanceof ServiceError && error.is(passkeyNameInvalid) ? "name" : undefined,
      );
    }
  });

  // Removing one asks for the password again, on a page of its own (as switching TOTP off does).
  const passkeyId = (request: FastifyRequest<{ Params: { id: string } }>) => pathId(request.params.id);
  const removePage = async (
    request: FastifyRequest<{ Params: { id: string } }>,
    reply: FastifyReply,
    errors: FieldErrors = {},
    status = 200,
  ) => {
    // Another user's passkey (or none): `passkey.not_found`, the error page with 404.
    const passkey = await passkeys.get(request.web.session!.user, passkeyId(request));
    return render(request, reply, "account/passkey-remove", { errors, passkey }, status);
  };
  app.get<{ Params: { id: string } }>("/account/passkeys/:id/remove", guarded, (request, reply) =>
    removePage(request, reply),
  );
  app.post<{ Params: { id: string }; Body: Body }>(
    "/account/passkeys/:id/remove",
    posted,
    async (request, reply) => {
      await passkeys.get(request.web.session!.user, passkeyId(request));
      const confirmed = await confirmPassword(request, reply, services, text(request.body?.password));
      if ("errors" in confirmed) return removePage(request, reply, confirmed.errors, confirmed.status);
      await passkeys.remove(confirmed.proof, passkeyId(request), ownerOrigin("web", request.ip));
      const off = !(await passkeys.twoFactorIsOn(confirmed.proof.user));
      await addFlash(request, { kind: "success", key: off ? "passkeys.removedLast" : "passkeys.removed" });
      return seeOther(reply, "/account/passkeys");
    },
  );

  app.post<{ Body: Body }>("/account/passkeys/sign-in", posted, async (request, reply) => {
    try {
      await passkeys.setSignIn(request.web.session!.user, request.body?.passkeySignIn === "on");
    } catch (error) {
      if (error instanceof ServiceError && error.is(passkeyNone))
        return overview(request, reply, { passkeySignIn: refusalText(error) }, 409);
      throw error;
    }
    await addFlash(request, { kind: "success", key: "passkeys.signInSaved" });
    return seeOther(reply, "/account/passkeys");
  });

  // The second step of a password sign-in, with a passkey instead of a code.
  const secondStep = async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.web.session?.stage !== "second_factor")
      return reply.code(401).send({ error: "session.required", message: request.web.t("error.forbidden") });
  };
  app.post(
    "/2fa/passkey/options",
    { preHandler: [app.csrfProtection, secondStep] },
    async (request, reply) => {
      try {
        return { options: await passkeys.authenticationOptions(request.web.session!.user) };
      } catch (error) {
        return refuse(reply, request, error);
      }
    },
  );
  app.post<{ Body: Body }>(
    "/2fa/passkey",
    { preHandler: [app.csrfProtection, secondStep] },
    async (request, reply) => {
      const session = request.web.session!;
      let result: PasskeyCheck;
      try {
        result = await passkeys.verifySecondFactor(
          session.user,
          request.body?.response,
          webOrigin(request, reply),
        );
      } catch (error) {
        return refuse(reply, request, error);
      }
      if (result === "wrong") return failed(reply, request, 401, "passkeys.signInFailed");
      const { id } = await sessions.renew(session, "signed_in");
      setSessionCookie(request, reply, id);
      await completeSignIn(services, request, reply, session.user, "passkey");
      return { redirect: "/account" };
    },
  );

  // A sign-in with a passkey alone (discoverable credential): no session before it.
  app.post("/login/passkey/options", { preHandler: app.csrfProtection }, async (request, reply) => {
    try {
      return { options: await passkeys.authenticationOptions(null, webOrigin(request, reply)) };
    } catch (error) {
      return refuse(reply, request, error);
    }
  });
  app.post<{ Body: Body }>("/login/passkey", { preHandler: app.csrfProtection }, async (request, reply) => {
    const result = await passkeys.signIn(request.body?.response, webOrigin(request, reply));
    const { t } = request.web;
    switch (result.kind) {
      case "throttled":
        return refuse(reply, request, signInThrottled({ retryAfter: result.retryAfter }));
      case "wrong":
        return failed(reply, request, 401, "passkeys.signInFailed");
      case "sign_in_off":
        return reply
          .code(403)
          .send({ error: "passkey.sign_in_off", message: t("passkeys.signInOffForAccount") });
      case "spam":
        return reply
          .code(403)
          .send({ error: "passkey.account_disabled", message: t("passkeys.accountDisabled") });
    }
    // A new session id (never the one before), signed in: the passkey with user verification is
    // both factors. A required password change is then asked for by every page, as after a password.
    if (request.web.session) await sessions.end(request.web.session.idHash);
    const { id } = await sessions.create(result.user, "signed_in", {
      clientAddress: request.ip,
      userAgent: request.headers["user-agent"],
    });
    setSessionCookie(request, reply, id);
    await completeSignIn(services, request, reply, result.user, "passkey");
    return { redirect: result.kind === "password_change_required" ? "/account/password" : "/account" };
  });
}
