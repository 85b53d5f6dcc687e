import type { FastifyReply, FastifyRequest } from "fastify";
import { effectiveRoles, type Role } from "../accounts/roles.ts";
import type { SettingsService } from "../accounts/settings.ts";
import type { Locale, MessageKey, Translate } from "../i18n/catalogue.ts";
import type { Services } from "../services.ts";
import type { Flash, WebSession, WebSessions } from "./sessions.ts";

/** What every page handler has: the visitor's language, session and the services. */
export interface WebContext {
  locale: Locale;
  t: Translate;
  session: WebSession | null;
  sessions: WebSessions;
  settings: SettingsService;
}

declare module "fastify" {
  interface FastifyRequest {
    web: WebContext;
  }
}

export interface WebServices extends Services {
  sessions: WebSessions;
}

/** Field name -> message key (with params) of a form answered again with its problems. */
export type FieldErrors = Partial<
  Record<string, { key: MessageKey; params?: Record<string, string | number> }>
>;

export const sessionCookie = (secure: boolean) => (secure ? "__Host-session" : "session");

/** 303: after a POST the browser GETs the target, so reloading does not post again. */
export const seeOther = (reply: FastifyReply, url: string) => reply.code(303).redirect(url);

/** A numeric id from the path, or 0 (which no row has: the service answers "not found"). */
export const pathId = (raw: string): number => (/^\d{1,10}$/.test(raw) ? Number(raw) : 0);

/** A message for the next page of this session. */
export async function addFlash(request: FastifyRequest, flash: Flash): Promise<void> {
  const session = request.web.session;
  if (!session) return;
  session.data.flash = [...(session.data.flash ?? []), flash];
  await request.web.sessions.save(session);
}

export const hasRole = (session: WebSession | null, role: Role): boolean =>
  session !== null && effectiveRoles(session.user.roles).has(role);

/** The raw stored role (no hierarchy), as the reference checks spam. */
export const isSpam = (session: WebSession): boolean => session.user.roles.includes("ROLE_SPAM");
