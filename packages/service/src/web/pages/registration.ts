import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  invitationsOff,
  inviteCodesOnlyMultipliers,
  inviteCodeThrottled,
  inviteCodeUnusable,
  isMultiplier,
  type UsableInviteCode,
} from "../../accounts/invite-codes.ts";
import {
  maxLocalPartLength,
  minLocalPartLength,
  type RegistrationProblem,
  registrationRefused,
} from "../../accounts/registration.ts";
import { isRefusal, ServiceError, statusOfKind } from "../../errors.ts";
import { formatDateTime } from "../../i18n/dates.ts";
import { addFlash, type FieldErrors, seeOther, type WebServices } from "../context.ts";
import { notSuspicious, signedIn } from "../guards.ts";
import { webOrigin } from "../origin.ts";
import { refusalText, retryAfterHeader } from "../refusals.ts";
import { errorPage, render } from "../render.ts";
import { setSessionCookie } from "./sign-in.ts";

type Form = Record<string, string | undefined>;
const text = (value: unknown): string => (typeof value === "string" ? value : "");

/**
 * Where a visitor whose code cannot be used is sent (anonymous: no session for a flash): the start
 * page with the one text for every such code, whatever the reason.
 */
const unusableCodeNotice = "/?notice=inviteInvalid";

/** The message next to the field for each refusal of the registration service. */
function fieldErrors(problems: RegistrationProblem[]): FieldErrors {
  const errors: FieldErrors = {};
  for (const problem of problems) {
    if (problem.field === "localPart") {
      errors.localPart =
        problem.reason === "too_short"
          ? { key: "registration.localPart.tooShort", params: { min: minLocalPartLength } }
          : problem.reason === "too_long"
            ? { key: "registration.localPart.tooLong", params: { max: maxLocalPartLength } }
            : problem.reason === "characters"
              ? { key: "registration.localPart.characters" }
              : problem.reason === "syntax"
                ? { key: "registration.localPart.syntax" }
                : { key: "registration.localPart.taken" };
    } else if (problem.field === "password") {
      errors.password = refusalText(problem.reason);
    }
  }
  return errors;
}

/** The start page's invite-code form, `/register/{code}`, the welcome page and `/account/voucher`. */
export async function registrationPages(app: FastifyInstance, services: WebServices) {
  const { domains, inviteCodes, registration, sessions, settings } = services;

  /** The start page again (the sign-in page with the invite-code form), with the code's problem. */
  const startPage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    values: Record<string, string>,
    errors: FieldErrors,
    status: number,
  ) => {
    const primary = await domains.primary();
    return render(
      request,
      reply,
      "login",
      { values, errors, primaryDomain: primary?.name ?? "", notice: "", inviteForm: true },
      status,
    );
  };

  /**
   * The code's check (InviteCodeService.check, under the sign-in guard): the code, null when it
   * cannot be used (one answer for every reason), or the throttled refusal with its wait.
   */
  const usable = async (
    request: FastifyRequest,
    reply: FastifyReply,
    raw: string,
  ): Promise<UsableInviteCode | null | ServiceError> => {
    try {
      return await inviteCodes.check(raw, webOrigin(request, reply));
    } catch (error) {
      if (isRefusal(error, inviteCodeUnusable)) return null;
      if (isRefusal(error, inviteCodeThrottled)) return error;
      throw error;
    }
  };

  /** The start page with the throttled refusal at the code field (429, Retry-After). */
  const throttledStart = (request: FastifyRequest, reply: FastifyReply, refused: ServiceError) => {
    retryAfterHeader(reply, refused);
    return startPage(request, reply, { inviteCode: "" }, { inviteCode: refusalText(refused) }, 429);
  };

  app.post<{ Body: Form }>("/", { preHandler: app.csrfProtection }, async (request, reply) => {
    const code = text(request.body?.inviteCode).trim();
    const values = { inviteCode: code };
    if (code === "") return startPage(request, reply, values, { inviteCode: { key: "form.required" } }, 400);
    const check = await usable(request, reply, code);
    if (check instanceof ServiceError) return throttledStart(request, reply, check);
    if (check) return seeOther(reply, `/register/${check.code.code}`);
    // The field keeps no trace of the code: the answer is the same, byte for byte, for every code refused.
    return startPage(
      request,
      reply,
      { inviteCode: "" },
      { inviteCode: refusalText(inviteCodeUnusable()) },
      statusOfKind[inviteCodeUnusable.kind],
    );
  });

  app.get("/register", async (_request, reply) => seeOther(reply, "/"));

  const registrationForm = (
    request: FastifyRequest,
    reply: FastifyReply,
    code: string,
    domain: string,
    values: Record<string, string> = {},
    errors: FieldErrors = {},
    status = 200,
  ) => render(request, reply, "register/form", { code, domain, values, errors }, status);

  /** The code of the path, checked; sends the visitor to the start page when it cannot be used. */
  const usableCode = async (request: FastifyRequest<{ Params: { code: string } }>, reply: FastifyReply) => {
    const check = await usable(request, reply, request.params.code);
    if (check instanceof ServiceError) {
      await throttledStart(request, reply, check);
      return null;
    }
    if (check) return check.code;
    await seeOther(reply, unusableCodeNotice);
    return null;
  };

  app.get<{ Params: { code: string } }>("/register/:code", async (request, reply) => {
    const code = await usableCode(request, reply);
    if (!code) return reply;
    return registrationForm(request, reply, code.code, code.domain);
  });

  app.post<{ Params: { code: string }; Body: Form }>(
    "/register/:code",
    { preHandler: app.csrfProtection },
    async (request, reply) => {
      const code = await usableCode(request, reply);
      if (!code) return reply;
      const localPart = text(request.body?.localPart);
      const password = text(request.body?.password);
      const values = { localPart };
      const retry = (errors: FieldErrors, status = 422) =>
        registrationForm(request, reply, code.code, code.domain, values, errors, status);
      if (password !== text(request.body?.passwordRepeat))
        return retry({ passwordRepeat: { key: "password.mismatch" } });
      let result: Awaited<ReturnType<typeof registration.register>>;
      try {
        result = await registration.register({
          code: code.code,
          localPart,
          password,
          locale: request.web.locale,
          origin: webOrigin(request, reply),
        });
      } catch (error) {
        // The code went away meanwhile (another registration took it): back to the start page.
        if (isRefusal(error, inviteCodeUnusable)) return seeOther(reply, unusableCodeNotice);
        if (isRefusal(error, inviteCodeThrottled)) return throttledStart(request, reply, error);
        if (!isRefusal(error, registrationRefused)) throw error;
        const { problems } = error.params;
        const taken = problems.some((p) => p.field === "localPart" && p.reason === "taken");
        return retry(fieldErrors(problems), taken ? 409 : 422);
      }
      // Signed in at once, with a session of its own (never one the visitor had before). As in
      // the reference this is no sign-in: the last login stays empty until the first real one.
      if (request.web.session) await sessions.end(request.web.session.idHash);
      const { id, session } = await sessions.create(result.user, "signed_in", {
        clientAddress: request.ip,
        userAgent: request.headers["user-agent"],
      });
      setSessionCookie(request, reply, id);
      request.web.session = session;
      if (result.recoveryToken === null) {
        await addFlash(request, { kind: "success", key: "registration.registered" });
        return seeOther(reply, "/register/welcome");
      }
      // Shown in this answer only: never in a URL, a log or the session.
      return render(request, reply, "recovery-token-show", {
        token: result.recoveryToken,
        action: "/register/recovery-token",
      });
    },
  );

  app.post<{ Body: Form }>(
    "/register/recovery-token",
    { preHandler: [app.csrfProtection, signedIn] },
    async (request, reply) => {
      if (request.body?.ack !== "yes") {
        const token = text(request.body?.token);
        const errors: FieldErrors = { ack: { key: "recoveryToken.ackMissing" } };
        return render(
          request,
          reply,
          "recovery-token-show",
          { token, action: "/register/recovery-token", errors },
          422,
        );
      }
      await addFlash(request, { kind: "success", key: "registration.registered" });
      return seeOther(reply, "/register/welcome");
    },
  );

  app.get("/register/welcome", { preHandler: signedIn }, async (request, reply) => {
    const user = request.web.session!.user;
    const [projectName, webmailUrl, showVouchers] = await Promise.all([
      settings.get("project_name"),
      settings.get("webmail_url"),
      inviteCodes.mayHaveCodes(user),
    ]);
    return render(request, reply, "register/welcome", { projectName, webmailUrl, showVouchers });
  });

  const voucherPage = async (request: FastifyRequest, reply: FastifyReply) => {
    const user = request.web.session!.user;
    const enabled = await inviteCodes.mayHaveCodes(user);
    const domain = user.email.slice(user.email.lastIndexOf("@") + 1);
    if (!enabled) return render(request, reply, "account/voucher", { enabled, domain });
    const [codes, allowance, appUrl] = await Promise.all([
      inviteCodes.unredeemedOf(user.id),
      inviteCodes.allowance(user.id),
      settings.get("app_url"),
    ]);
    const base = appUrl.replace(/\/+$/, "");
    return render(request, reply, "account/voucher", {
      enabled,
      domain,
      codes: codes.map((code) => ({ code: code.code, link: `${base}/register/${code.code}` })),
      allowance,
      waitingUntil: formatDateTime(request.web.locale, allowance.waitingUntil),
      multiplier: isMultiplier(user.roles),
    });
  };

  app.get("/account/voucher", { preHandler: notSuspicious }, voucherPage);

  // Handing out is a POST of its own: viewing the page changes nothing (the reference's bug 19).
  app.post(
    "/account/voucher/hand-out",
    { preHandler: [app.csrfProtection, notSuspicious] },
    async (request, reply) => {
      const created = await inviteCodes.handOut(request.web.session!.user.id);
      await addFlash(
        request,
        created.length > 0
          ? { kind: "success", key: "registration.codes.handedOut", params: { count: created.length } }
          : { kind: "info", key: "registration.codes.nothingDue" },
      );
      return seeOther(reply, "/account/voucher");
    },
  );

  app.post(
    "/account/voucher/create",
    { preHandler: [app.csrfProtection, notSuspicious] },
    async (request, reply) => {
      try {
        await inviteCodes.createOneMore(request.web.session!.user.id);
      } catch (error) {
        if (isRefusal(error, inviteCodesOnlyMultipliers) || isRefusal(error, invitationsOff))
          return errorPage(request, reply, 403, request.web.t("error.forbidden"));
        throw error;
      }
      await addFlash(request, { kind: "success", key: "registration.codes.created" });
      return seeOther(reply, "/account/voucher");
    },
  );
}
