import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { type Actor, notPermitted, userActor } from "../../../accounts/admin-scope.ts";
import type { ListCursor } from "../../../admin/keyset.ts";
import { ServiceError, statusOfKind } from "../../../errors.ts";
import type { MessageKey } from "../../../i18n/catalogue.ts";
import { formatDateTime } from "../../../i18n/dates.ts";
import type { FieldErrors } from "../../context.ts";
import { withRole } from "../../guards.ts";
import { type RefusalFields, refusalOnField, refusalText } from "../../refusals.ts";
import { render } from "../../render.ts";

export type Form = Record<string, string | string[] | undefined>;
export type Query = Record<string, string | undefined>;

/** A single form or query value; a repeated one counts as its first. */
export const text = (value: unknown): string =>
  typeof value === "string" ? value : Array.isArray(value) && typeof value[0] === "string" ? value[0] : "";

/** Every value of a repeated field (checkboxes). */
export const texts = (value: unknown): string[] =>
  typeof value === "string"
    ? [value]
    : Array.isArray(value)
      ? value.filter((v) => typeof v === "string")
      : [];

/** `/admin` and below: signed in with ROLE_DOMAIN_ADMIN or ROLE_ADMIN (the hierarchy); others get 403. */
export const adminArea = withRole("ROLE_DOMAIN_ADMIN");

/** The route options of an admin page: `guarded` for a page, `posted` for a form (its CSRF token first). */
export const adminRoutes = (app: FastifyInstance) => ({
  guarded: { preHandler: adminArea },
  posted: { preHandler: [app.csrfProtection, adminArea] },
});

/** The signed-in admin as the admin services know it (after `adminArea`, never null). */
export function actorOf(request: FastifyRequest): Actor {
  const actor = userActor(request.web.session!.user, request.ip ?? null);
  if (!actor) throw notPermitted({ actor: request.web.session!.user.email, subject: "admin area" });
  return actor;
}

/** A whole number of a form or query: undefined when empty, NaN when not a whole number. */
export function wholeNumber(value: unknown): number | undefined {
  const raw = text(value).trim();
  if (raw === "") return undefined;
  return /^\d{1,15}$/.test(raw) ? Number(raw) : Number.NaN;
}

/** The list position of `?after=` / `?before=` (ids); anything else is the first page. */
export function cursorOf(query: Query): ListCursor {
  const after = wholeNumber(query.after);
  const before = wholeNumber(query.before);
  if (after !== undefined && Number.isFinite(after)) return { after };
  if (before !== undefined && Number.isFinite(before)) return { before };
  return {};
}

/** A `YYYY-MM-DD` date as Unix seconds at 00:00 UTC; undefined when empty, null when not a date. */
export function dateOf(value: string): number | undefined | null {
  if (value === "") return undefined;
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return null;
  const time = Date.parse(`${value}T00:00:00Z`);
  return Number.isNaN(time) ? null : Math.floor(time / 1000);
}

/**
 * The "from" and "to" date fields of the logs' pages: the texts as typed (for the form), their
 * errors, and the filter's window in Unix seconds; the "to" date is inclusive (before the next day).
 */
export function dateWindow(query: Query): {
  typed: { since: string; until: string };
  errors: FieldErrors;
  window: { since?: number; until?: number };
} {
  const typed = { since: text(query.since).trim(), until: text(query.until).trim() };
  const since = dateOf(typed.since);
  const until = dateOf(typed.until);
  const errors: FieldErrors = {};
  if (since === null) errors.since = { key: "admin.audit.badDate" };
  if (until === null) errors.until = { key: "admin.audit.badDate" };
  const window = {
    ...(typeof since === "number" ? { since } : {}),
    ...(typeof until === "number" ? { until: until + 86_400 } : {}),
  };
  return { typed, errors, window };
}

/** `?page=N` of the offset-paged lists (audit log, deliveries): 1 or more. */
export function pageOf(query: Query): number {
  const page = wholeNumber(query.page);
  return page !== undefined && Number.isFinite(page) && page >= 1 ? Math.min(page, 100_000) : 1;
}

/** The query string of a list's filters with one cursor replaced (the pager's links). */
export function listUrl(
  path: string,
  filters: Record<string, string | undefined>,
  extra: Record<string, string | number>,
) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(filters)) if (value) params.set(name, value);
  for (const [name, value] of Object.entries(extra)) params.set(name, String(value));
  const query = params.toString();
  return query === "" ? path : `${path}?${query}`;
}

/** The previous and next links of an offset-paged list (`?page=N` beside its filters); null at either end. */
export function pageLinks(
  path: string,
  filters: Record<string, string | undefined>,
  page: { page: number; perPage: number; total: number },
): { previousUrl: string | null; nextUrl: string | null } {
  const link = (n: number) => listUrl(path, filters, { page: n });
  return {
    previousUrl: page.page > 1 ? link(page.page - 1) : null,
    nextUrl: page.page * page.perPage < page.total ? link(page.page + 1) : null,
  };
}

/** The admin area's sections, in the navigation's order; `all`: admins only. */
export const sections: { path: string; key: MessageKey; reach: "all" | "domain" }[] = [
  { path: "/admin", key: "admin.nav.dashboard", reach: "domain" },
  { path: "/admin/users", key: "admin.nav.users", reach: "domain" },
  { path: "/admin/aliases", key: "admin.nav.aliases", reach: "domain" },
  { path: "/admin/domains", key: "admin.nav.domains", reach: "all" },
  { path: "/admin/domain", key: "admin.nav.myDomain", reach: "domain" },
  { path: "/admin/invite-codes", key: "admin.nav.inviteCodes", reach: "domain" },
  { path: "/admin/openpgp-keys", key: "admin.nav.openPgpKeys", reach: "domain" },
  { path: "/admin/reserved-names", key: "admin.nav.reservedNames", reach: "all" },
  { path: "/admin/settings", key: "admin.nav.settings", reach: "all" },
  { path: "/admin/api-tokens", key: "admin.nav.apiTokens", reach: "all" },
  { path: "/admin/webhooks", key: "admin.nav.webhooks", reach: "all" },
  { path: "/admin/maintenance", key: "admin.nav.maintenance", reach: "all" },
  { path: "/admin/audit-log", key: "admin.nav.auditLog", reach: "domain" },
  { path: "/admin/security-events", key: "admin.nav.securityEvents", reach: "domain" },
];

/**
 * An admin page: the wide layout (`body.admin`), the section navigation the actor may use, and a
 * formatter of times in the visitor's language.
 */
export function adminPage(
  request: FastifyRequest,
  reply: FastifyReply,
  template: string,
  data: Record<string, unknown> = {},
  status = 200,
) {
  const actor = actorOf(request);
  const path = request.url.split("?")[0] ?? "";
  const nav = sections
    .filter((section) =>
      actor.reach === "all" ? section.path !== "/admin/domain" : section.reach === "domain",
    )
    .map((section) => ({
      ...section,
      current:
        section.path === "/admin"
          ? path === "/admin"
          : path === section.path || path.startsWith(`${section.path}/`),
    }));
  return render(
    request,
    reply,
    template,
    {
      bodyClass: "admin",
      adminNav: nav,
      actor,
      when: (seconds: number | null) => (seconds === null ? "" : formatDateTime(request.web.locale, seconds)),
      ...data,
    },
    status,
  );
}

/**
 * A service's refusal of a form's input as the field's error, by its code (`fields`), else on the
 * form's `fallback` field; the text is the catalogue's for the code, in the visitor's language, and
 * the status the refusal's. Null for anything that is no refusal of the input (the caller rethrows:
 * a not-found or forbidden refusal gets its own page).
 */
export function refusedFields(
  reply: FastifyReply,
  error: unknown,
  fields: RefusalFields,
  fallback: string,
): { errors: FieldErrors; status: number } | null {
  const mapped = refusalOnField(reply, error, fields);
  if (mapped) return mapped;
  if (!(error instanceof ServiceError) || (error.kind !== "invalid" && error.kind !== "conflict"))
    return null;
  return { errors: { [fallback]: refusalText(error) }, status: statusOfKind[error.kind] };
}

/** `…/:name` of the admin paths: the address or name as typed (Fastify has decoded it). */
export const param = (request: FastifyRequest, name: string): string =>
  String((request.params as Record<string, unknown>)[name] ?? "");

/** An address or name for a path segment. */
export const segment = (value: string) => encodeURIComponent(value);
