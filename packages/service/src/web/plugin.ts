import { fileURLToPath } from "node:url";
import cookie from "@fastify/cookie";
import csrf from "@fastify/csrf-protection";
import helmet from "@fastify/helmet";
import fastifyStatic from "@fastify/static";
import type { FastifyError, FastifyInstance } from "fastify";
import { driverFault, isDatabaseUnavailable } from "../db/unavailable.ts";
import { ServiceError, statusOfKind } from "../errors.ts";
import { defaultLocale, isLocale, translator } from "../i18n/catalogue.ts";
import { faultOf } from "../logger.ts";
import type { Services } from "../services.ts";
import { sessionCookie, type WebContext, type WebServices } from "./context.ts";
import { csrfCookie, readCsrfSecret } from "./csrf.ts";
import { accountPages } from "./pages/account.ts";
import { adminPages } from "./pages/admin/index.ts";
import { aliasPages } from "./pages/aliases.ts";
import { appPasswordPages } from "./pages/app-passwords.ts";
import { initPages } from "./pages/init.ts";
import { openPgpPages } from "./pages/openpgp.ts";
import { passkeyPages } from "./pages/passkeys.ts";
import { recoveryPages } from "./pages/recovery.ts";
import { registrationPages } from "./pages/registration.ts";
import { signInPages } from "./pages/sign-in.ts";
import { twoFactorPages } from "./pages/two-factor.ts";
import { refusalText, retryAfterHeader } from "./refusals.ts";
import { errorPage, langCookie, localeOf } from "./render.ts";
import { WebSessions } from "./sessions.ts";

/**
 * The web interface: server-rendered pages with their own sessions, CSRF tokens, security headers
 * and HTML error pages. Encapsulated: nothing here reaches the APIs' routes or hooks.
 */
const staticFiles = fileURLToPath(new URL("./static/", import.meta.url));

export async function webInterface(app: FastifyInstance, services: Services) {
  const sessions = new WebSessions(services.database.db);
  const web: WebServices = { ...services, sessions };
  await app.register(cookie);
  await app.register(helmet, {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        imgSrc: ["'self'", "data:"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        objectSrc: ["'none'"],
        baseUri: ["'self'"],
        frameAncestors: ["'none'"],
        formAction: ["'self'"],
      },
    },
    referrerPolicy: { policy: "same-origin" },
    // HSTS belongs to the TLS front (contrib/reverse-proxy); over plain HTTP it would be ignored anyway.
    strictTransportSecurity: false,
  });
  await app.register(csrf, {
    sessionPlugin: "@fastify/cookie",
    cookieKey: csrfCookie(false),
    cookieOpts: { path: "/", httpOnly: true, sameSite: "lax", signed: false },
  });
  await app.register(fastifyStatic, {
    root: staticFiles,
    prefix: "/static/",
    maxAge: 3600 * 1000,
    decorateReply: false,
    index: false,
  });
  app.decorateRequest("web", undefined as unknown as WebContext);

  app.addHook("onRequest", async (request, reply) => {
    readCsrfSecret(request);
    // `_locale` is userli's name for the same choice: links and bookmarks made for userli keep working.
    const query = request.query as Record<string, unknown> | undefined;
    const wanted = query?.lang ?? query?._locale;
    if (request.method === "GET" && isLocale(wanted)) {
      reply.setCookie(langCookie, wanted, {
        path: "/",
        sameSite: "lax",
        httpOnly: true,
        secure: request.protocol === "https",
        maxAge: 365 * 24 * 3600,
      });
      const url = new URL(request.url, "http://x");
      url.searchParams.delete("lang");
      url.searchParams.delete("_locale");
      return reply.code(303).redirect(url.pathname + url.search);
    }
    const locale = localeOf(request);
    const secure = request.protocol === "https";
    const session = await sessions.find(request.cookies[sessionCookie(secure)]);
    request.web = { locale, t: translator(locale), session, sessions, settings: services.settings };
    reply.header("cache-control", "no-store");
    reply.header("content-language", locale);
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (!request.web)
      request.web = {
        locale: defaultLocale,
        t: translator(localeOf(request)),
        session: null,
        sessions,
        settings: services.settings,
      };
    const { t } = request.web;
    if (error.code?.startsWith("FST_CSRF")) return errorPage(request, reply, 403, t("form.csrf"));
    if (error instanceof ServiceError) {
      // A refusal no form took as a field error: a page of its own, in the visitor's language.
      retryAfterHeader(reply, error);
      const { key, params } = refusalText(error);
      return errorPage(request, reply, statusOfKind[error.kind], t(key, params));
    }
    if (isDatabaseUnavailable(error)) {
      request.log.warn({ err: driverFault(error) }, "database unavailable");
      return errorPage(request, reply, 503, t("error.unavailable"));
    }
    if (error.code === "FST_REQ_FILE_TOO_LARGE" || error.statusCode === 413)
      return errorPage(request, reply, 413, t("error.tooLarge"));
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500)
      return errorPage(request, reply, error.statusCode, t("error.badRequest"));
    request.log.error({ err: faultOf(error) }, "web page failed");
    return errorPage(request, reply, 500, t("error.internal"));
  });

  await signInPages(app, web);
  await accountPages(app, web);
  await twoFactorPages(app, web);
  await passkeyPages(app, web);
  await appPasswordPages(app, web);
  await aliasPages(app, web);
  await openPgpPages(app, web);
  await registrationPages(app, web);
  await initPages(app, web);
  await recoveryPages(app, web);
  await adminPages(app, web);
}
