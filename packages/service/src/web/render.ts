import { fileURLToPath } from "node:url";
import { Eta } from "eta";
import type { FastifyReply, FastifyRequest } from "fastify";
import { minPasswordLength } from "../accounts/password-policy.ts";
import {
  isLocale,
  type Locale,
  localeNames,
  locales,
  negotiateLocale,
  translator,
} from "../i18n/catalogue.ts";
import { csrfToken } from "./csrf.ts";

const templates = fileURLToPath(new URL("./templates/", import.meta.url));
const eta = new Eta({ views: templates, cache: true, autoEscape: true, autoTrim: false });
export const langCookie = "lang";

/** Render a page of templates/ with the data every page gets (texts, session, CSRF token, flashes). */
export async function render(
  request: FastifyRequest,
  reply: FastifyReply,
  template: string,
  data: Record<string, unknown> = {},
  status = 200,
): Promise<FastifyReply> {
  const { web } = request;
  const flash = web.session?.data.flash ?? [];
  if (web.session && flash.length > 0) {
    web.session.data.flash = [];
    await web.sessions.save(web.session);
  }
  const html = eta.render(template, {
    appName: await web.settings.get("app_name"),
    t: web.t,
    locale: web.locale,
    locales,
    localeNames,
    session: web.session,
    user: web.session?.stage === "signed_in" ? web.session.user : null,
    csrfToken: csrfToken(request, reply),
    flash,
    path: request.url.split("?")[0],
    errors: {},
    values: {},
    // The password rule's bound, for the forms' hints (accounts/password-policy.ts).
    minPasswordLength,
    ...data,
  });
  return reply.code(status).type("text/html; charset=utf-8").send(html);
}

export function localeOf(request: FastifyRequest): Locale {
  const chosen = request.cookies[langCookie];
  return isLocale(chosen) ? chosen : negotiateLocale(request.headers["accept-language"]);
}

/** A page for a status, in the visitor's language (also used by the app's not-found handler). */
export function errorPage(request: FastifyRequest, reply: FastifyReply, status: number, message: string) {
  const locale = request.web?.locale ?? negotiateLocale(request.headers["accept-language"]);
  const t = request.web?.t ?? translator(locale);
  const html = eta.render("error", {
    t,
    locale,
    locales,
    localeNames,
    session: null,
    user: request.web?.session?.stage === "signed_in" ? request.web.session.user : null,
    csrfToken: "",
    flash: [],
    path: request.url.split("?")[0],
    status,
    message,
  });
  return reply.code(status).type("text/html; charset=utf-8").send(html);
}

export function notFoundPage(request: FastifyRequest, reply: FastifyReply) {
  const t = translator(negotiateLocale(request.headers["accept-language"]));
  return errorPage(request, reply, 404, t("error.notFound"));
}
