import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { SecondFactorKind } from "../../accounts/security-events.ts";
import { type SecondFactorResult, signInThrottled } from "../../accounts/sign-in.ts";
import type { User } from "../../accounts/users.ts";
import { type FieldErrors, seeOther, sessionCookie, type WebServices } from "../context.ts";
import { newDevice, webOrigin } from "../origin.ts";
import { refusalOnField } from "../refusals.ts";
import { render } from "../render.ts";

interface LoginBody {
  email?: string;
  password?: string;
}

interface CodeBody {
  code?: string;
}

const text = (value: unknown): string => (typeof value === "string" ? value : "");

/** Sets the session cookie: HttpOnly, SameSite=Lax, Secure (and `__Host-`) over TLS. */
export function setSessionCookie(request: FastifyRequest, reply: FastifyReply, id: string) {
  const secure = request.protocol === "https";
  reply.setCookie(sessionCookie(secure), id, { path: "/", httpOnly: true, sameSite: "lax", secure });
}

export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply) {
  const secure = request.protocol === "https";
  reply.clearCookie(sessionCookie(secure), { path: "/", httpOnly: true, sameSite: "lax", secure });
}

/** The whole sign-in succeeded: it counts as activity, and this browser is a device the guard knows. */
export async function completeSignIn(
  services: WebServices,
  request: FastifyRequest,
  reply: FastifyReply,
  user: User,
  secondFactor?: SecondFactorKind,
) {
  await services.signIn.recordCompletedSignIn(user, webOrigin(request, reply), secondFactor);
  await services.signInGuard.trustDevice(user.email, newDevice(request, reply));
}

/** `/`, `/login`, `/2fa`, `/logout`. */
export async function signInPages(app: FastifyInstance, services: WebServices) {
  const { sessions, signIn, domains } = services;

  /** A bare local part means an address on the primary domain. */
  const qualify = async (email: string): Promise<string> => {
    const trimmed = email.trim();
    if (trimmed === "" || trimmed.includes("@")) return trimmed;
    const primary = await domains.primary();
    return primary ? `${trimmed}@${primary.name}` : trimmed;
  };

  const loginForm = async (
    request: FastifyRequest,
    reply: FastifyReply,
    values: Record<string, string> = {},
    errors: FieldErrors = {},
    status = 200,
    extra: Record<string, unknown> = {},
  ) => {
    const primary = await domains.primary();
    const query = request.query as Record<string, string | undefined>;
    return render(
      request,
      reply,
      "login",
      { values, errors, primaryDomain: primary?.name ?? "", notice: query.notice ?? "", ...extra },
      status,
    );
  };

  const signedIn = (request: FastifyRequest, reply: FastifyReply, user: User) =>
    completeSignIn(services, request, reply, user);

  /** The user is in: a new session id (never the pre-sign-in one), then the second step or the account. */
  const startSession = async (request: FastifyRequest, reply: FastifyReply, user: User) => {
    if (request.web.session) await sessions.end(request.web.session.idHash);
    // The one place the web decides that a sign-in needs its second step (TOTP or a passkey).
    const twoFactor = await services.passkeys.twoFactorIsOn(user);
    const { id } = await sessions.create(user, twoFactor ? "second_factor" : "signed_in", {
      clientAddress: request.ip,
      userAgent: request.headers["user-agent"],
    });
    setSessionCookie(request, reply, id);
    if (twoFactor) return seeOther(reply, "/2fa");
    await signedIn(request, reply, user);
    return seeOther(reply, "/account");
  };

  app.get("/", async (request, reply) => {
    if (!(await domains.primary())) return seeOther(reply, "/init");
    if (request.web.session?.stage === "signed_in") return seeOther(reply, "/account");
    // The invite-code form (pages/registration.ts answers its POST) while any domain invites.
    return loginForm(request, reply, {}, {}, 200, { inviteForm: await domains.anyInvitationsEnabled() });
  });

  app.get("/login", async (request, reply) => {
    if (request.web.session?.stage === "signed_in") return seeOther(reply, "/account");
    return loginForm(request, reply);
  });

  app.post<{ Body: LoginBody }>("/login", { preHandler: app.csrfProtection }, async (request, reply) => {
    const email = text(request.body?.email);
    const password = text(request.body?.password);
    const values = { email };
    if (email.trim() === "" || password === "") {
      const errors: FieldErrors = {};
      if (email.trim() === "") errors.email = { key: "form.required" };
      if (password === "") errors.password = { key: "form.required" };
      return loginForm(request, reply, values, errors, 400);
    }
    const result = await signIn.signIn(await qualify(email), password, {
      ...webOrigin(request, reply),
      deferActivity: true,
    });
    switch (result.kind) {
      case "throttled":
        reply.header("retry-after", String(result.retryAfter));
        return loginForm(
          request,
          reply,
          values,
          { email: { key: "login.throttled", params: { count: result.retryAfter } } },
          429,
        );
      case "unknown":
      case "wrong_password":
        return loginForm(request, reply, values, { password: { key: "login.failed" } }, 401);
      default:
        return startSession(request, reply, result.user);
    }
  });

  /** The second step: the code form while TOTP is on, the passkey button while the user has one. */
  const secondStep = async (
    request: FastifyRequest,
    reply: FastifyReply,
    data: Record<string, unknown> = {},
    status = 200,
  ) => {
    const user = request.web.session!.user;
    return render(
      request,
      reply,
      "two-factor",
      {
        totp: user.totpConfirmed && user.totpSecret !== null,
        passkey: (await services.passkeys.list(user)).length > 0,
        ...data,
      },
      status,
    );
  };

  app.get("/2fa", async (request, reply) => {
    if (request.web.session?.stage !== "second_factor") return seeOther(reply, "/login");
    return secondStep(request, reply);
  });

  app.post<{ Body: CodeBody }>("/2fa", { preHandler: app.csrfProtection }, async (request, reply) => {
    const session = request.web.session;
    if (session?.stage !== "second_factor") return seeOther(reply, "/login");
    const code = text(request.body?.code).replace(/\s+/g, "");
    let result: SecondFactorResult;
    try {
      result = await signIn.validateSecondFactor(session.user, code, webOrigin(request, reply));
    } catch (error) {
      const refused = refusalOnField(reply, error, [[signInThrottled, "code"]]);
      if (refused) return secondStep(request, reply, { errors: refused.errors }, refused.status);
      throw error;
    }
    if (result !== "ok" && result !== "password_change_required")
      return secondStep(request, reply, { errors: { code: { key: "twoFactor.invalid" } } }, 401);
    const { id } = await sessions.renew(session, "signed_in");
    setSessionCookie(request, reply, id);
    await signedIn(request, reply, session.user);
    return seeOther(reply, "/account");
  });

  app.post("/logout", { preHandler: app.csrfProtection }, async (request, reply) => {
    if (request.web.session) await sessions.end(request.web.session.idHash);
    clearSessionCookie(request, reply);
    return seeOther(reply, "/login?notice=signedOut");
  });
}
