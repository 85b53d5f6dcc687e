import type { Transaction } from "kysely";
import type { Actor } from "../accounts/admin-scope.ts";
import type {
  AppPasswordInput,
  AppPasswordService,
  AppPasswordView,
  CreatedAppPassword,
} from "../accounts/app-passwords.ts";
import type { AuditLog } from "../accounts/audit-log.ts";
import { actorOrigin } from "../accounts/security-events.ts";
import { type User, userNotFound } from "../accounts/users.ts";
import type { Database } from "../db/schema.ts";
import type { AdminUsers } from "./users.ts";

/**
 * A user's app passwords in the admin area (the pages and the API): seen and changed only where
 * the actor reaches the user (AdminUsers.get, the one reach rule), every change audited inside the
 * transaction that makes it. Values are never listed; a created one is answered once.
 */
export class AdminAppPasswords {
  readonly #users: AdminUsers;
  readonly #appPasswords: AppPasswordService;
  readonly #audit: AuditLog;

  constructor(users: AdminUsers, appPasswords: AppPasswordService, audit: AuditLog) {
    this.#users = users;
    this.#appPasswords = appPasswords;
    this.#audit = audit;
  }

  /** The active user the actor may manage: a deleted one has no app passwords to manage. */
  async #activeUser(actor: Actor, email: string): Promise<User> {
    const user = await this.#users.get(actor, email);
    if (user.deleted) throw userNotFound();
    return user;
  }

  /** Inside the change's transaction: the actor still reaches the user, and the change is audited. */
  async #audited(
    trx: Transaction<Database>,
    actor: Actor,
    user: User,
    action: "user.app-password.create" | "user.app-password.revoke",
    detail: Record<string, unknown>,
  ): Promise<void> {
    await this.#users.get(actor, user.email, trx);
    await this.#audit.record(
      actor,
      { action, target: user.email, targetDomainId: user.domainId, detail },
      trx,
    );
  }

  async list(actor: Actor, email: string): Promise<AppPasswordView[]> {
    const user = await this.#users.get(actor, email);
    return user.deleted ? [] : this.#appPasswords.list(user);
  }

  /**
   * An app password made by an admin (a printer's or a script's): for a user with MailCrypt keys
   * only an SMTP-only one (`app_password.needs_owner`), since its key is sealed under the owner's password.
   */
  async create(actor: Actor, email: string, input: AppPasswordInput): Promise<CreatedAppPassword> {
    const user = await this.#activeUser(actor, email);
    return this.#appPasswords.createByAdmin(user, input, actorOrigin(actor), (trx, id) =>
      this.#audited(trx, actor, user, "user.app-password.create", { id, scope: input.scope }),
    );
  }

  /** Ends one app password of this user; another user's id is not found. */
  async revoke(actor: Actor, email: string, id: number): Promise<void> {
    const user = await this.#activeUser(actor, email);
    await this.#appPasswords.revoke(user, id, actorOrigin(actor), (trx) =>
      this.#audited(trx, actor, user, "user.app-password.revoke", { id }),
    );
  }
}
