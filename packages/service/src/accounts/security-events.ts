import type { Kysely, Transaction } from "kysely";
import type { AppPasswordScope, Database } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { parseAddress } from "./addresses.ts";
import type { Actor } from "./admin-scope.ts";
import type { Listing } from "./paging.ts";
import { nowSeconds } from "./users.ts";

/**
 * The security event log: sign-ins, second-factor failures and every change of an account's
 * credentials or sessions, one row each, written in the transaction of the change (or of the
 * verdict). Its owner reads their own (/account/activity), administrators all of it or their
 * domain's (`GET /api/admin/security-events`, /admin/security-events). A row never holds a secret:
 * an event's detail is typed per event and holds only numbers, flags and words of our own.
 */

export const securityEventTypes = [
  "sign_in.succeeded",
  "sign_in.failed",
  "sign_in.throttled",
  "second_factor.failed",
  "guessing.ceiling_reached",
  "password.changed",
  "recovery.started",
  "recovery.completed",
  "recovery.stopped",
  "recovery_token.renewed",
  "two_factor.enabled",
  "two_factor.disabled",
  "sessions.ended",
  "app_password.created",
  "app_password.removed",
  "app_passwords.required_changed",
  "passkey.added",
  "passkey.removed",
  "passkey.cloned",
  "account.deleted",
  "account.restored",
] as const;
export type SecurityEventType = (typeof securityEventTypes)[number];
export const isSecurityEventType = (value: string): value is SecurityEventType =>
  (securityEventTypes as readonly string[]).includes(value);

/** Where an attempt or a change came in. */
export const securityEventDoors = [
  "web",
  "passdb",
  "mta_auth",
  "webmail",
  "identity",
  "console",
  "admin_api",
  "job",
] as const;
export type SecurityEventDoor = (typeof securityEventDoors)[number];

/** How an event reads in one word on the activity page: an attempt's verdict, or a change. */
export type SecurityEventResult = "succeeded" | "failed" | "throttled" | "changed";
export function resultOf(type: SecurityEventType): SecurityEventResult {
  switch (type) {
    case "sign_in.succeeded":
      return "succeeded";
    case "sign_in.failed":
    case "second_factor.failed":
    case "passkey.cloned":
      return "failed";
    case "sign_in.throttled":
    case "guessing.ceiling_reached":
      return "throttled";
    default:
      return "changed";
  }
}

export type SecondFactorKind = "totp" | "backup_code" | "passkey";
/**
 * Why a sign-in failed; the typed address itself is the row's `email` (only when it is an address).
 * `passkey_sign_in_off`: a valid passkey of a user who has not turned on signing in with it alone.
 */
export type SignInFailure =
  | "wrong_password"
  | "unknown_account"
  | "account_disabled"
  | "passkey_sign_in_off"
  /** The account password at IMAP or SMTP while "mail apps must use app passwords" is on. */
  | "app_password_required"
  /** An app password outside its scope (an SMTP-only one at IMAP). */
  | "app_password_scope";
/** How a password came to change. */
export type PasswordChange = "changed" | "reset" | "recovery";
/** Why sessions ended. */
export type SessionsEndedBecause =
  | "signed_out_everywhere"
  | "ended_by_admin"
  | "password_changed"
  | "password_reset"
  | "two_factor_enabled"
  | "recovery"
  | "account_deleted";

/**
 * One event: its type and the detail that type may carry. There is no free-form field: nothing a
 * caller holds (a password, code, token or key) fits into one.
 */
export type SecurityEvent =
  | { type: "sign_in.succeeded"; detail?: { secondFactor?: SecondFactorKind; appPassword?: number } }
  | { type: "sign_in.failed"; detail: { reason: SignInFailure } }
  | { type: "sign_in.throttled"; detail: { retryAfter: number } }
  /** A wrong code does not tell which kind it was meant to be. */
  | { type: "second_factor.failed"; detail?: { method: SecondFactorKind } }
  /** The account's daily ceiling over all clients: `failures` today, from `clients` client groups. */
  | { type: "guessing.ceiling_reached"; detail: { failures: number; clients: number } }
  | { type: "password.changed"; detail: { how: PasswordChange } }
  | { type: "recovery.started" }
  | { type: "recovery.completed" }
  | { type: "recovery.stopped"; detail: { how: "new_recovery_token" | "reset" } }
  | { type: "recovery_token.renewed" }
  | { type: "two_factor.enabled" }
  | { type: "two_factor.disabled"; detail: { how: "switched_off" | "reset" | "recovery" } }
  | { type: "sessions.ended"; detail: { sessions: number; because: SessionsEndedBecause } }
  /** App passwords: the password's id, never its name or value. */
  | { type: "app_password.created"; detail: { id: number; scope: AppPasswordScope } }
  | { type: "app_password.removed"; detail: { id: number; how: "revoked" | "reset" } }
  /** "Mail apps must use app passwords" set by its owner or an admin; `domain_default` follows the domain. */
  | { type: "app_passwords.required_changed"; detail: { setting: "on" | "off" | "domain_default" } }
  /** Passkeys: the passkey's id, never its name or credential. */
  | { type: "passkey.added"; detail: { id: number } }
  | { type: "passkey.removed"; detail: { id: number } }
  /** A passkey's signature counter went back: a copy of the credential signed; refused. */
  | { type: "passkey.cloned"; detail: { id: number } }
  | { type: "account.deleted" }
  | { type: "account.restored" };

/** The account an event is about. */
export interface SecurityEventSubject {
  /** Null for an address no account holds (a failed sign-in). */
  id: number | null;
  /** The account's address at the time; an unknown account's only when it is an address. */
  email: string | null;
  /** The account's domain (who may read the event); null outside every managed domain. */
  domainId: number | null;
}

/** Where an event came from: the door, the client's address, and who acted when not the owner. */
export interface SecurityEventOrigin {
  door: SecurityEventDoor;
  clientAddress: string | null;
  /**
   * Who acted when not the account's owner: an admin's address, `console`, `api-token:<name>` or
   * `job:<name>`; null when the owner did.
   */
  actor: string | null;
}

/** The account's owner at a door. */
export const ownerOrigin = (door: SecurityEventDoor, clientAddress?: string | null): SecurityEventOrigin => ({
  door,
  clientAddress: clientAddress ?? null,
  actor: null,
});

/** An admin action: the actor's name and address; the door follows from who it is (admin-scope.ts names them). */
export function actorOrigin(actor: Actor): SecurityEventOrigin {
  const door: SecurityEventDoor =
    actor.name === "console" ? "console" : actor.name.startsWith("api-token:") ? "admin_api" : "web";
  return { door, clientAddress: actor.clientAddress, actor: actor.name };
}

export interface SecurityEventRecord {
  id: number;
  /** Unix seconds. */
  at: number;
  type: SecurityEventType;
  result: SecurityEventResult;
  userId: number | null;
  email: string | null;
  domainId: number | null;
  /** The domain's name, while it exists. */
  domain: string | null;
  door: SecurityEventDoor;
  clientAddress: string | null;
  actor: string | null;
  detail: Record<string, string | number | boolean> | null;
}

export interface SecurityEventFilter {
  /** Only this account's address (exactly, any case). */
  email?: string;
  type?: string;
  userId?: number;
  /** Unix seconds, inclusive. */
  since?: number;
  /** Unix seconds, exclusive. */
  until?: number;
  /** Only these domains (a domain admin's reach); an empty list sees nothing. Undefined: all. */
  domainIds?: readonly number[];
}

export interface SecurityEventPage {
  limit: number;
  offset: number;
}

/** The latest failed sign-ins of one account, by client address (for the owner's warning e-mail). */
export interface RecentFailures {
  failures: number;
  clients: { clientAddress: string | null; failures: number; lastAt: number }[];
}

export const securityEventTypeUnknown = refusal<{ type: string }>(
  "security_event.type_unknown",
  "invalid",
  ({ type }) => `type: unknown event type ${type}`,
);
export const securityEventEmailInvalid = refusal(
  "security_event.email_invalid",
  "invalid",
  () => "email: not an e-mail address",
);

const secondsPerDay = 86400;

export class SecurityEventLog {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /**
   * Records one event inside the transaction of the change (or the verdict) it describes: the
   * event exists exactly when the change does.
   */
  async record(
    trx: Transaction<Database>,
    subject: SecurityEventSubject,
    origin: SecurityEventOrigin,
    event: SecurityEvent,
    at: number = nowSeconds(),
  ): Promise<void> {
    // An unknown account's "address" is whatever was typed: people type passwords there too.
    const email =
      subject.email === null ? null : subject.id !== null ? subject.email : storedAddress(subject.email);
    const detail = "detail" in event && event.detail ? JSON.stringify(event.detail) : null;
    await trx
      .insertInto("security_events")
      .values({
        occurred_at: at,
        type: event.type,
        user_id: subject.id,
        email: email?.slice(0, 255) ?? null,
        domain_id: subject.domainId,
        door: origin.door,
        client_address: origin.clientAddress?.slice(0, 64) ?? null,
        actor: origin.actor?.slice(0, 255) ?? null,
        detail,
      })
      .execute();
  }

  /** Events newest first, filtered; `email` and `type` are checked (a 4xx refusal, never a failing query). */
  async list(filter: SecurityEventFilter, page: SecurityEventPage): Promise<Listing<SecurityEventRecord>> {
    if (filter.domainIds !== undefined && filter.domainIds.length === 0) return { items: [], total: 0 };
    let query = this.#db.selectFrom("security_events");
    if (filter.domainIds !== undefined)
      query = query.where("security_events.domain_id", "in", [...filter.domainIds]);
    if (filter.email !== undefined) {
      const address = parseAddress(filter.email.trim());
      if (!address) throw securityEventEmailInvalid();
      query = query.where("security_events.email", "=", address.email);
    }
    if (filter.type !== undefined) {
      if (!isSecurityEventType(filter.type))
        throw securityEventTypeUnknown({ type: filter.type.replaceAll("\0", "").slice(0, 64) });
      query = query.where("security_events.type", "=", filter.type);
    }
    if (filter.userId !== undefined) query = query.where("security_events.user_id", "=", filter.userId);
    if (filter.since !== undefined) query = query.where("security_events.occurred_at", ">=", filter.since);
    if (filter.until !== undefined) query = query.where("security_events.occurred_at", "<", filter.until);
    const [rows, count] = await Promise.all([
      query
        .leftJoin("domains", "domains.id", "security_events.domain_id")
        .selectAll("security_events")
        .select("domains.name as domain")
        .orderBy("security_events.occurred_at", "desc")
        .orderBy("security_events.id", "desc")
        .limit(page.limit)
        .offset(page.offset)
        .execute(),
      query.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    ]);
    return {
      items: rows.map((row) => {
        const type = row.type as SecurityEventType;
        return {
          id: Number(row.id),
          at: Number(row.occurred_at),
          type,
          result: resultOf(type),
          userId: row.user_id === null ? null : Number(row.user_id),
          email: row.email,
          domainId: row.domain_id === null ? null : Number(row.domain_id),
          domain: row.domain ?? null,
          door: row.door as SecurityEventDoor,
          clientAddress: row.client_address,
          actor: row.actor,
          detail: parseDetail(row.detail),
        };
      }),
      total: Number(count.n),
    };
  }

  /** One account's events, newest first (what its owner reads). */
  forUser(userId: number, page: SecurityEventPage): Promise<Listing<SecurityEventRecord>> {
    return this.list({ userId }, page);
  }

  /** Removes events older than `olderThanDays` days; returns how many. */
  async prune(olderThanDays: number, now: number = nowSeconds()): Promise<number> {
    const result = await this.#db
      .deleteFrom("security_events")
      .where("occurred_at", "<", now - olderThanDays * secondsPerDay)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /**
   * The failed sign-ins of one account since `since` (default: the last day): how many, and the
   * `limit` client addresses that failed last, each with its count.
   */
  async recentFailures(
    email: string,
    limit: number,
    since: number = nowSeconds() - secondsPerDay,
  ): Promise<RecentFailures> {
    const address = parseAddress(email);
    if (!address) return { failures: 0, clients: [] };
    const query = this.#db
      .selectFrom("security_events")
      .where("email", "=", address.email)
      .where("type", "=", "sign_in.failed")
      .where("occurred_at", ">=", since);
    const [clients, total] = await Promise.all([
      query
        .select((eb) => [
          "client_address",
          eb.fn.countAll<number>().as("n"),
          eb.fn.max("occurred_at").as("last_at"),
        ])
        .groupBy("client_address")
        .orderBy("last_at", "desc")
        .limit(limit)
        .execute(),
      query.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    ]);
    return {
      failures: Number(total.n),
      clients: clients.map((row) => ({
        clientAddress: row.client_address,
        failures: Number(row.n),
        lastAt: Number(row.last_at),
      })),
    };
  }
}

/** An address as stored: its normal form, or nothing when the text is no address. */
function storedAddress(text: string): string | null {
  return parseAddress(text.trim())?.email ?? null;
}

function parseDetail(text: string | null): Record<string, string | number | boolean> | null {
  if (text === null) return null;
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)
      ? (parsed as Record<string, string | number | boolean>)
      : null;
  } catch {
    return null;
  }
}
