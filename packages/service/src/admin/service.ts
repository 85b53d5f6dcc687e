import type { Kysely } from "kysely";
import type { AliasService } from "../accounts/aliases.ts";
import type { AppPasswordService } from "../accounts/app-passwords.ts";
import { AuditLog } from "../accounts/audit-log.ts";
import type { DomainService } from "../accounts/domains.ts";
import type { InviteCodeService } from "../accounts/invite-codes.ts";
import type { LifecycleService } from "../accounts/lifecycle.ts";
import type { ReservedNameService } from "../accounts/reserved-names.ts";
import type { SecurityEventLog } from "../accounts/security-events.ts";
import type { SettingsService } from "../accounts/settings.ts";
import type { UserService } from "../accounts/users.ts";
import type { DatabaseHandle } from "../db/database.ts";
import type { Database } from "../db/schema.ts";
import type { OpenPgpKeyService } from "../openpgp/keys.ts";
import type { TokenService } from "../tokens/tokens.ts";
import type { WebhookService } from "../webhooks/endpoints.ts";
import { AdminAliases } from "./aliases.ts";
import { AdminAppPasswords } from "./app-passwords.ts";
import { AdminDashboard } from "./dashboard.ts";
import { AdminDomains } from "./domains.ts";
import { AdminInviteCodes, AdminReservedNames } from "./invitations.ts";
import { AdminMaintenance } from "./maintenance.ts";
import { AdminOpenPgpKeys } from "./openpgp-keys.ts";
import { AdminSecurityEvents } from "./security-events.ts";
import { AdminSettings, AdminTokens, AdminWebhooks } from "./system.ts";
import { AdminUsers } from "./users.ts";

export interface AdminDependencies {
  db: Kysely<Database>;
  database: Pick<DatabaseHandle, "dialect">;
  users: UserService;
  aliases: AliasService;
  domains: DomainService;
  lifecycle: LifecycleService;
  settings: SettingsService;
  tokens: TokenService;
  webhooks: WebhookService;
  openPgpKeys: OpenPgpKeyService;
  inviteCodes: InviteCodeService;
  reservedNames: ReservedNameService;
  securityEvents: SecurityEventLog;
  appPasswords: AppPasswordService;
}

/**
 * Administration as every surface does it (the web's admin area, the admin API, the console): each
 * action takes its actor, is allowed or refused by the one rule (accounts/admin-scope.ts), is done
 * by the same service functions, and is written to the audit log.
 */
export class AdminService {
  readonly auditLog: AuditLog;
  readonly securityEvents: AdminSecurityEvents;
  readonly users: AdminUsers;
  readonly appPasswords: AdminAppPasswords;
  readonly aliases: AdminAliases;
  readonly domains: AdminDomains;
  readonly openPgpKeys: AdminOpenPgpKeys;
  readonly inviteCodes: AdminInviteCodes;
  readonly reservedNames: AdminReservedNames;
  readonly settings: AdminSettings;
  readonly tokens: AdminTokens;
  readonly webhooks: AdminWebhooks;
  readonly maintenance: AdminMaintenance;
  readonly dashboard: AdminDashboard;

  constructor(deps: AdminDependencies) {
    const { db } = deps;
    const audit = new AuditLog(db);
    this.auditLog = audit;
    this.securityEvents = new AdminSecurityEvents(deps.securityEvents);
    this.users = new AdminUsers(
      db,
      deps.users,
      deps.lifecycle,
      audit,
      deps.securityEvents,
      deps.appPasswords,
      deps.database.dialect,
    );
    this.appPasswords = new AdminAppPasswords(this.users, deps.appPasswords, audit);
    this.aliases = new AdminAliases(db, deps.aliases, deps.lifecycle, audit);
    this.domains = new AdminDomains(db, deps.domains, deps.lifecycle, audit);
    this.openPgpKeys = new AdminOpenPgpKeys(db, deps.openPgpKeys, audit);
    this.inviteCodes = new AdminInviteCodes(db, deps.inviteCodes, deps.domains, audit);
    this.reservedNames = new AdminReservedNames(db, deps.reservedNames, audit);
    this.settings = new AdminSettings(db, deps.settings, audit);
    this.tokens = new AdminTokens(db, deps.tokens, audit);
    this.webhooks = new AdminWebhooks(db, deps.webhooks, audit);
    this.maintenance = new AdminMaintenance(db, deps.settings, deps.lifecycle, deps.webhooks, audit);
    this.dashboard = new AdminDashboard(db, deps.webhooks);
  }
}
