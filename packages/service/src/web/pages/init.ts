import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { domainNameInvalid } from "../../accounts/domains.ts";
import { normalizeSetting, settingDefinitions } from "../../accounts/settings.ts";
import { type SetupSetting, type SetupStep, setupCodeWrong, setupSettings } from "../../accounts/setup.ts";
import { ServiceError } from "../../errors.ts";
import { addFlash, type FieldErrors, hasRole, seeOther, type WebServices } from "../context.ts";
import { newPasswordFields, repeatErrors } from "../password-confirmation.ts";
import { refusalOnField, refusalText } from "../refusals.ts";
import { errorPage, render } from "../render.ts";
import { setSessionCookie } from "./sign-in.ts";

type Form = Record<string, string | undefined>;
const text = (value: unknown): string => (typeof value === "string" ? value : "");

/** Where each step of the setup lives. */
const stepPath: Record<SetupStep, string> = {
  domain: "/init",
  admin: "/init/user",
  settings: "/init/settings",
  done: "/",
};

/**
 * `/init`: the first-run setup (services.setup). Every step is answered only while it is the
 * current one, on GET and on POST alike; otherwise the visitor is sent to the current step and
 * nothing changes (the reference's POST handlers did not check: its bug 14). The first admin is
 * signed in when created, and only that admin (or any admin) may save the settings step, so a
 * stranger cannot set the service's addresses between the second and the third step.
 *
 * The first two steps change something only with the set-up code (logged at start while no
 * administrator exists; services.setup checks it), so whoever reaches the page before the operator
 * cannot make the domain or become the administrator. Step 1 hands the code on to step 2's form as a
 * hidden field (no state in a cookie); step 2 reached directly asks for it. Step 3 needs the
 * administrator's session, which only step 2 (or the console) gives.
 */
export async function initPages(app: FastifyInstance, services: WebServices) {
  const { setup, domains, sessions } = services;

  /** Null when `step` is the current step; otherwise the redirect to the current one. */
  const elsewhere = async (reply: FastifyReply, step: SetupStep) => {
    const current = await setup.step();
    return current === step ? null : seeOther(reply, stepPath[current]);
  };

  // ---- step 1: the primary domain

  const domainForm = (
    request: FastifyRequest,
    reply: FastifyReply,
    values: Record<string, string> = {},
    errors: FieldErrors = {},
    status = 200,
  ) => render(request, reply, "init/domain", { values, errors }, status);

  app.get(
    "/init",
    async (request, reply) => (await elsewhere(reply, "domain")) ?? domainForm(request, reply),
  );

  app.post<{ Body: Form }>("/init", { preHandler: app.csrfProtection }, async (request, reply) => {
    const redirect = await elsewhere(reply, "domain");
    if (redirect) return redirect;
    const name = text(request.body?.domain).trim();
    const setupCode = text(request.body?.setupCode);
    const values = { domain: name, setupCode };
    if (setupCode.trim() === "")
      return domainForm(request, reply, values, { setupCode: { key: "form.required" } }, 400);
    if (name === "") return domainForm(request, reply, values, { domain: { key: "form.required" } }, 400);
    try {
      await setup.createPrimaryDomain(name, setupCode);
    } catch (error) {
      const refused = refusalOnField(reply, error, [
        [setupCodeWrong, "setupCode"],
        [domainNameInvalid, "domain"],
      ]);
      if (refused) return domainForm(request, reply, values, refused.errors, refused.status);
      if (!(error instanceof ServiceError)) throw error;
      // Someone finished this step meanwhile.
      return seeOther(reply, stepPath[await setup.step()]);
    }
    // Step 2's form at once, carrying the code that was just accepted.
    return adminForm(request, reply, {}, 200, setupCode);
  });

  // ---- step 2: the first administrator

  /** `carriedCode`: the set-up code given before, sent on as a hidden field (else a field asks for it). */
  const adminForm = async (
    request: FastifyRequest,
    reply: FastifyReply,
    errors: FieldErrors = {},
    status = 200,
    carriedCode = "",
  ) => {
    const primary = await domains.primary();
    return render(
      request,
      reply,
      "init/admin",
      { errors, email: `postmaster@${primary?.name ?? ""}`, carriedCode },
      status,
    );
  };

  app.get(
    "/init/user",
    async (request, reply) => (await elsewhere(reply, "admin")) ?? adminForm(request, reply),
  );

  app.post<{ Body: Form }>("/init/user", { preHandler: app.csrfProtection }, async (request, reply) => {
    const redirect = await elsewhere(reply, "admin");
    if (redirect) return redirect;
    const password = text(request.body?.password);
    const setupCode = text(request.body?.setupCode);
    if (setupCode.trim() === "")
      return adminForm(request, reply, { setupCode: { key: "form.required" } }, 400);
    const errors = repeatErrors(password, text(request.body?.passwordRepeat), "password");
    if (Object.keys(errors).length > 0) return adminForm(request, reply, errors, 422, setupCode);
    let created: Awaited<ReturnType<typeof setup.createFirstAdmin>>;
    try {
      created = await setup.createFirstAdmin(password, setupCode);
    } catch (error) {
      const wrongCode = refusalOnField(reply, error, [[setupCodeWrong, "setupCode"]]);
      if (wrongCode) return adminForm(request, reply, wrongCode.errors, wrongCode.status);
      const refused = refusalOnField(reply, error, newPasswordFields("password"));
      if (refused) return adminForm(request, reply, refused.errors, refused.status, setupCode);
      if (!(error instanceof ServiceError)) throw error;
      return seeOther(reply, stepPath[await setup.step()]);
    }
    if (request.web.session) await sessions.end(request.web.session.idHash);
    const { id } = await sessions.create(created.user, "signed_in", {
      clientAddress: request.ip,
      userAgent: request.headers["user-agent"],
    });
    setSessionCookie(request, reply, id);
    return seeOther(reply, stepPath.settings);
  });

  // ---- step 3: the basic settings (the first admin, signed in)

  /** An admin's session, or the answer for anyone else. */
  const admin = async (request: FastifyRequest, reply: FastifyReply) => {
    const session = request.web.session;
    if (session?.stage !== "signed_in") {
      await seeOther(reply, "/login");
      return false;
    }
    if (!hasRole(session, "ROLE_ADMIN")) {
      await errorPage(request, reply, 403, request.web.t("error.forbidden"));
      return false;
    }
    return true;
  };

  const fields = setupSettings.map((name) => {
    const definition: { type: string; optional?: boolean } = settingDefinitions[name];
    const type = definition.type === "email" ? "email" : definition.type === "url" ? "url" : "text";
    return { name, type, required: !definition.optional };
  });

  const settingsForm = (
    request: FastifyRequest,
    reply: FastifyReply,
    values: Record<string, string>,
    errors: FieldErrors = {},
    status = 200,
  ) => render(request, reply, "init/settings", { fields, values, errors }, status);

  app.get("/init/settings", async (request, reply) => {
    const redirect = await elsewhere(reply, "settings");
    if (redirect) return redirect;
    if (!(await admin(request, reply))) return reply;
    return settingsForm(request, reply, await setup.settingsProposal());
  });

  app.post<{ Body: Form }>("/init/settings", { preHandler: app.csrfProtection }, async (request, reply) => {
    const redirect = await elsewhere(reply, "settings");
    if (redirect) return redirect;
    if (!(await admin(request, reply))) return reply;
    const values = {} as Record<SetupSetting, string>;
    const errors: FieldErrors = {};
    for (const name of setupSettings) {
      values[name] = text(request.body?.[name]);
      try {
        normalizeSetting(name, values[name]);
      } catch (error) {
        if (!(error instanceof ServiceError)) throw error;
        errors[name] = refusalText(error);
      }
    }
    if (Object.keys(errors).length > 0) return settingsForm(request, reply, values, errors, 422);
    try {
      await setup.saveSettings(values);
    } catch (error) {
      if (!(error instanceof ServiceError) || error.kind !== "conflict") throw error;
      return seeOther(reply, stepPath[await setup.step()]);
    }
    await addFlash(request, { kind: "success", key: "init.configured" });
    return seeOther(reply, "/");
  });
}
