import type { FastifyError, FastifyInstance } from "fastify";
import { ServiceError } from "../../../errors.ts";
import type { WebServices } from "../../context.ts";
import { errorPage } from "../../render.ts";
import { adminAliasPages } from "./aliases.ts";
import { adminAuditLogPages } from "./audit-log.ts";
import { adminDashboardPages } from "./dashboard.ts";
import { adminDomainPages } from "./domains.ts";
import { adminInviteCodePages } from "./invite-codes.ts";
import { adminMaintenancePages } from "./maintenance.ts";
import { adminOpenPgpKeyPages } from "./openpgp-keys.ts";
import { adminReservedNamePages } from "./reserved-names.ts";
import { adminSecurityEventPages } from "./security-events.ts";
import { adminSettingsPages } from "./settings.ts";
import { adminTokenPages } from "./tokens.ts";
import { adminUserPages } from "./users.ts";
import { adminWebhookPages } from "./webhooks.ts";

/**
 * `/admin…`, the admin area, in a scope of its own: every page needs ROLE_DOMAIN_ADMIN (or
 * ROLE_ADMIN), and every action goes through the admin services (services.admin), which decide
 * with the actor's reach what it may see and do, and write the audit log. A refusal there is the
 * 403 page, an unknown object the 404 page; anything else goes on to the web's own error handler.
 */
export async function adminPages(app: FastifyInstance, services: WebServices) {
  await app.register(async (scope) => {
    scope.setErrorHandler((error: FastifyError, request, reply) => {
      if (error instanceof ServiceError && error.kind === "forbidden")
        return errorPage(request, reply, 403, request.web.t("error.forbidden"));
      if (error instanceof ServiceError && error.kind === "not_found")
        return errorPage(request, reply, 404, request.web.t("error.notFound"));
      throw error;
    });
    await adminDashboardPages(scope, services);
    await adminUserPages(scope, services);
    await adminAliasPages(scope, services);
    await adminDomainPages(scope, services);
    await adminInviteCodePages(scope, services);
    await adminReservedNamePages(scope, services);
    await adminOpenPgpKeyPages(scope, services);
    await adminSettingsPages(scope, services);
    await adminTokenPages(scope, services);
    await adminWebhookPages(scope, services);
    await adminMaintenancePages(scope, services);
    await adminAuditLogPages(scope, services);
    await adminSecurityEventPages(scope, services);
  });
}
