import type { Kysely, Transaction } from "kysely";
import type { Database } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { type Actor, domainScope } from "./admin-scope.ts";
import { containsText, type Listing } from "./paging.ts";
import { nowSeconds } from "./users.ts";

export const auditActionUnknown = refusal<{ action: string }>(
  "audit.action_unknown",
  "invalid",
  ({ action }) => `action: unknown action ${action}`,
);

/** The admin actions the log knows (the filter's choices); each surface records these names. */
export const auditActions = [
  "user.create",
  "user.update",
  "user.delete",
  "user.reset",
  "user.restore",
  "user.totp.enable",
  "user.totp.disable",
  "user.sessions.end",
  "user.app-password.create",
  "user.app-password.revoke",
  "alias.create",
  "alias.update",
  "alias.delete",
  "domain.create",
  "domain.update",
  "domain.delete",
  "invite-code.create",
  "invite-code.delete",
  "reserved-name.create",
  "reserved-name.delete",
  "reserved-name.import",
  "openpgp-key.import",
  "openpgp-key.delete",
  "settings.update",
  "api-token.create",
  "api-token.delete",
  "webhook.create",
  "webhook.update",
  "webhook.delete",
  "webhook-delivery.retry",
  "job.run",
] as const;
export type AuditAction = (typeof auditActions)[number];
export const isAuditAction = (value: string): value is AuditAction =>
  (auditActions as readonly string[]).includes(value);

/** What was done, to what; `detail` lists the changed fields (never a secret: `withoutSecrets`). */
export interface AuditEntry {
  action: AuditAction;
  /** The object: an address, a domain name, `api-token:<name>`, `webhook:<id>`, a job's name. */
  target?: string | null;
  /** The domain the object belongs to: a domain admin sees the entries of its domain. */
  targetDomainId?: number | null;
  detail?: Record<string, unknown> | null;
}

export interface AuditRecord {
  id: number;
  at: number;
  actor: string;
  actorDomainId: number | null;
  action: string;
  target: string | null;
  targetDomainId: number | null;
  /** The name of the target's domain, while the domain exists. */
  domain: string | null;
  detail: Record<string, unknown> | null;
  clientAddress: string | null;
}

export interface AuditFilter {
  /** The actor's name, exactly (an address, `console`, `api-token:<name>`). */
  actor?: string;
  action?: string;
  /** Part of the target. */
  target?: string;
  domainId?: number;
  /** Unix seconds, inclusive. */
  since?: number;
  /** Unix seconds, exclusive. */
  until?: number;
}

/**
 * Field names whose values are never written to the log, at any depth: passwords, secrets, tokens,
 * keys, backup codes, invite codes (`passwordChangeRequired` is a flag and stays). Callers leave
 * them out already; this is the net under them.
 */
const secretField = /(password|secret|token|backupcodes|privatekey|keydata)$|^(key|code|pass)$/i;

export function withoutSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutSecrets);
  if (value === null || typeof value !== "object") return value;
  const result: Record<string, unknown> = {};
  for (const [name, inner] of Object.entries(value)) {
    if (secretField.test(name) || inner === undefined) continue;
    result[name] = withoutSecrets(inner);
  }
  return result;
}

/** The longest detail kept: a settings change of every field fits with room to spare. */
const maxDetailLength = 16_000;

/**
 * The audit log of admin actions: who (actor and its domain), what (action, target, changed
 * fields), when and from which address. Written by every surface through the admin services
 * (admin/), read by admins in full and by domain admins for their own domain.
 */
export class AuditLog {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /**
   * Records one action, inside the transaction of the change it describes: the entry exists
   * exactly when the change does (a failed insert rolls the change back).
   */
  async record(actor: Actor, entry: AuditEntry, trx: Transaction<Database>): Promise<void> {
    let detail: string | null = null;
    if (entry.detail && Object.keys(entry.detail).length > 0) {
      detail = JSON.stringify(withoutSecrets(entry.detail));
      if (detail.length > maxDetailLength) detail = JSON.stringify({ truncated: true });
    }
    await trx
      .insertInto("audit_log")
      .values({
        at: nowSeconds(),
        actor: actor.name.slice(0, 255),
        actor_domain_id: actor.domainId,
        action: entry.action,
        target: entry.target?.slice(0, 255) ?? null,
        target_domain_id: entry.targetDomainId ?? null,
        detail,
        client_address: actor.clientAddress?.slice(0, 64) ?? null,
      })
      .execute();
  }

  /**
   * Entries newest first. A domain admin sees only the entries about its own domain, whatever the
   * filter asks for.
   */
  async list(
    viewer: Actor,
    filter: AuditFilter,
    page: { limit: number; offset: number },
  ): Promise<Listing<AuditRecord>> {
    let query = this.#db.selectFrom("audit_log");
    const scope = domainScope(viewer);
    if (scope !== null) query = query.where("audit_log.target_domain_id", "=", scope);
    if (filter.domainId !== undefined)
      query = query.where("audit_log.target_domain_id", "=", filter.domainId);
    if (filter.actor) query = query.where("audit_log.actor", "=", filter.actor);
    if (filter.action) {
      if (!isAuditAction(filter.action)) throw auditActionUnknown({ action: filter.action.slice(0, 64) });
      query = query.where("audit_log.action", "=", filter.action);
    }
    if (filter.target) query = query.where(containsText("audit_log.target", filter.target));
    if (filter.since !== undefined) query = query.where("audit_log.at", ">=", filter.since);
    if (filter.until !== undefined) query = query.where("audit_log.at", "<", filter.until);
    const [rows, count] = await Promise.all([
      query
        .leftJoin("domains", "domains.id", "audit_log.target_domain_id")
        .selectAll("audit_log")
        .select("domains.name as domain")
        .orderBy("audit_log.at", "desc")
        .orderBy("audit_log.id", "desc")
        .limit(page.limit)
        .offset(page.offset)
        .execute(),
      query.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    ]);
    return {
      items: rows.map((row) => ({
        id: Number(row.id),
        at: Number(row.at),
        actor: row.actor,
        actorDomainId: row.actor_domain_id === null ? null : Number(row.actor_domain_id),
        action: row.action,
        target: row.target,
        targetDomainId: row.target_domain_id === null ? null : Number(row.target_domain_id),
        domain: row.domain ?? null,
        detail: parseDetail(row.detail),
        clientAddress: row.client_address,
      })),
      total: Number(count.n),
    };
  }
}

function parseDetail(text: string | null): Record<string, unknown> | null {
  if (text === null) return null;
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}
