import type { Insertable, Kysely, Selectable } from "kysely";
import { activityDay } from "../accounts/activity.ts";
import { checkAddress, checkDomain, wildcardIn } from "../accounts/address-syntax.ts";
import {
  checkInvitations,
  type DomainInvitations,
  maxInvitationLimit,
  maxWaitingPeriodDays,
} from "../accounts/domains.ts";
import { legacyInviteCodePattern } from "../accounts/invite-codes.ts";
import { unusablePassword } from "../accounts/lifecycle.ts";
import { normalizeReservedName } from "../accounts/reserved-names.ts";
import { isRole, normalizeRoles } from "../accounts/roles.ts";
import { isSettingName, normalizeSetting } from "../accounts/settings.ts";
import { checkQuota, checkSmtpQuota } from "../accounts/users.ts";
import { type BackupCodeKey, findBackupCode, hashBackupCode } from "../credentials/backup-codes.ts";
import { passwordHashScheme } from "../credentials/passwords.ts";
import type { Database, UserTable, WebhookEndpointTable } from "../db/schema.ts";
import { ServiceError } from "../errors.ts";
import { wkdHash } from "../openpgp/wkd.ts";
import { checkScopes, checkTokenName } from "../tokens/tokens.ts";
import { checkEvents, checkSecret, checkUrl } from "../webhooks/endpoints.ts";
import { webhookEvents } from "../webhooks/payload.ts";
import {
  type ImportProgress,
  type ImportReport,
  newSummary,
  type RowNote,
  type TableSummary,
} from "./report.ts";
import {
  type Column,
  changedColumns,
  insertRows,
  pick,
  rowsByKey,
  type TextColumn,
  updateByKey,
} from "./tables.ts";
import {
  type SourceRow,
  type SourceValue,
  sourceFlag,
  sourceTime,
  type UserliSource,
} from "./userli-source.ts";

/**
 * `app:import:userli`: a userli 6.x database into this service. Every value goes through the
 * service's own rules (the address rule, roles, quotas, settings, token scopes, webhook checks) and
 * is stored in the service's form; credentials are taken over as they are (password hashes of every
 * scheme verifyPassword reads, MailCrypt keys and secret boxes, recovery boxes, TOTP secrets, API
 * token hashes), except TOTP backup codes, which userli keeps in plain text and this service only
 * as keyed hashes (backup-codes.ts). Nothing is re-hashed: legacy password hashes are upgraded by
 * the sign-in, as for any user. No webhook fires: the accounts are not new, only moved.
 *
 * Rows are read in batches and each batch is written in one transaction, keyed by what identifies
 * a row in both systems (a domain's name, a user's address, an alias's source, a token's hash...),
 * so a second run updates what changed and adds what is new, and an interrupted run is simply run
 * again. A row that cannot be taken is reported with its table, id and reason, never dropped quietly.
 */

export interface UserliImportOptions {
  /** Read and check everything, compare with this service's data, write nothing. */
  dryRun?: boolean;
  /** Stop at the first refused row (its batch and all after it are not written). */
  strict?: boolean;
  /** Rows per batch and transaction (default 500). */
  batchSize?: number;
  onProgress?: (progress: ImportProgress) => void;
}

/** The userli tables and the columns read from each: their final state (userli 6.10). */
const sourceTables = {
  domains: [
    "id",
    "name",
    "invitation_enabled",
    "invitation_limit",
    "invitation_waiting_period_days",
    "creation_time",
    "updated_time",
  ],
  users: [
    "id",
    "email",
    "domain_id",
    "password",
    "roles",
    "password_change_required",
    "quota",
    "smtp_quota_limits",
    "mail_crypt",
    "mail_crypt_public_key",
    "mail_crypt_secret_box",
    "recovery_secret_box",
    "recovery_start_time",
    "totp_secret",
    "totp_confirmed",
    "totp_backup_codes",
    "invitation_voucher_id",
    "last_login_time",
    "creation_time",
    "updated_time",
    "deleted",
  ],
  aliases: [
    "id",
    "source",
    "destination",
    "user_id",
    "domain_id",
    "random",
    "note",
    "smtp_quota_limits",
    "deleted",
    "creation_time",
    "updated_time",
  ],
  vouchers: ["id", "code", "user_id", "domain_id", "redeemed_time", "creation_time"],
  reserved_names: ["id", "name", "creation_time", "updated_time"],
  openpgp_keys: [
    "id",
    "email",
    "key_id",
    "key_fingerprint",
    "key_expire_time",
    "key_data",
    "wkd_hash",
    "uploader_id",
    "domain_id",
  ],
  api_tokens: ["id", "name", "scopes", "token", "creation_time", "last_used_time"],
  settings: ["id", "name", "value", "creation_time", "updated_time"],
  webhook_endpoints: ["id", "url", "secret", "events", "enabled", "creation_time", "updated_time"],
  webhook_endpoint_domain: ["webhook_endpoint_id", "domain_id"],
} as const;
type SourceTable = keyof typeof sourceTables;
type SourceColumn<T extends SourceTable> = (typeof sourceTables)[T][number];
/** The same list, indexed so that a table's columns keep their type under a type parameter. */
const sourceColumns: { [T in SourceTable]: readonly SourceColumn<T>[] } = sourceTables;
/** A row of a userli table: the columns read from it. */
type UserliRow<T extends SourceTable> = SourceRow<SourceColumn<T>>;

/** userli tables with nothing this service takes over. */
const skippedTables = {
  webhook_deliveries: "delivery history; the endpoints are imported",
  user_notifications: "compromised-password notices already sent",
  messenger_messages: "userli's job queue",
} as const;

/** A row that cannot be imported, and why. */
class Refusal extends Error {}
const refuse = (reason: string): never => {
  throw new Refusal(reason);
};

/**
 * A user's address or an alias's source holding a character a purge tool reads as a wildcard
 * (address-syntax.ts): older userli versions could create one, but such a mailbox could never be
 * purged safely by the janitor, so the row is reported instead of imported. Alias destinations may
 * lie outside and reach no purge command: they are not checked here.
 */
const refuseWildcard = (field: string, address: string): void => {
  const wildcard = wildcardIn(address);
  if (wildcard !== null)
    refuse(`${field}: ${address} holds ${wildcard}, which a purge tool reads as a wildcard`);
};

/** `--strict` met a refused row. */
class StrictStop extends Error {}

/** An alias's plan and the address of its owner, made this service's user id when its batch is written. */
type AliasPlan = Plan<"aliases"> & { owner: string | null };

/** A row as it should be in this service, under the key both systems know it by. */
interface Plan<T extends keyof Database> {
  sourceId: string;
  key: string;
  /** Written on insert and, but for `insertOnly`, compared with the stored row. */
  values: Insertable<Database[T]>;
  /** Columns written on insert only, never compared. */
  insertOnly?: readonly Column<T>[];
  /** Written with every update. */
  onUpdate?: Partial<Insertable<Database[T]>>;
}

interface Written {
  added: number;
  updated: number;
  unchanged: number;
}

const text = (value: SourceValue | undefined): string | null =>
  value === null || value === undefined ? null : String(value);

const integer = (value: SourceValue | undefined): number | null => {
  if (value === null || value === undefined || value === "") return null;
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : Number.NaN;
};

/** A time column: Unix seconds, null when empty, refused when not a date. */
function time<C extends string>(row: SourceRow<C>, column: C): number | null {
  const value = sourceTime(row[column]);
  if (value !== null && !Number.isFinite(value)) refuse(`${column}: not a date (${String(row[column])})`);
  return value;
}

function requiredTime<C extends string>(row: SourceRow<C>, column: C): number {
  return time(row, column) ?? refuse(`${column} is empty`);
}

/**
 * A list column: JSON (userli 6), or the PHP-serialized array of strings userli wrote before its
 * 2026-01 migrations (`a:1:{i:0;s:9:"ROLE_USER";}`), in case a database kept one.
 */
export function sourceList(value: SourceValue | undefined): unknown[] | null {
  if (value === null || value === undefined || value === "") return [];
  const raw = String(value);
  if (raw.startsWith("a:")) return phpStringArray(raw);
  try {
    const parsed: unknown = JSON.parse(raw);
    if (Array.isArray(parsed)) return parsed;
    // A PHP array with gaps in its keys is written as a JSON object.
    if (parsed !== null && typeof parsed === "object") return Object.values(parsed);
    return null;
  } catch {
    return null;
  }
}

/** `a:2:{i:0;s:9:"ROLE_USER";i:1;s:10:"ROLE_ADMIN";}`: string lengths count bytes, not characters. */
function phpStringArray(raw: string): string[] | null {
  const bytes = Buffer.from(raw, "utf8");
  const header = /^a:(\d+):\{/.exec(raw);
  if (!header) return null;
  const at = (from: number) => bytes.toString("latin1", from, Math.min(bytes.length, from + 32));
  let position = header[0].length;
  const items: string[] = [];
  while (!at(position).startsWith("}")) {
    const element = /^i:\d+;s:(\d+):"/.exec(at(position));
    if (!element) return null;
    position += element[0].length;
    const length = Number(element[1]);
    items.push(bytes.toString("utf8", position, position + length));
    position += length;
    if (!at(position).startsWith('";')) return null;
    position += 2;
  }
  return items.length === Number(header[1]) ? items : null;
}

/** userli's `smtp_quota_limits` (`{"per_hour": n|null, "per_day": n|null}` or null) checked by our rule. */
function smtpLimits(value: SourceValue | undefined): { perHour: number | null; perDay: number | null } {
  if (value === null || value === undefined || value === "") return { perHour: null, perDay: null };
  let parsed: unknown;
  try {
    parsed = JSON.parse(String(value));
  } catch {
    return refuse("smtp_quota_limits: not JSON");
  }
  try {
    return checkSmtpQuota(parsed);
  } catch (error) {
    return refuse(error instanceof Error ? error.message.replace(/^smtpQuota/, "smtp_quota_limits") : "");
  }
}

/** A value of our rules' checks, or the row refused with the rule's message. */
function checked<T>(check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (error instanceof ServiceError) return refuse(error.message);
    throw error;
  }
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const flagValue = (value: boolean): 0 | 1 => (value ? 1 : 0);

/** The stored row was changed here after userli's last change of it. */
const changedHereLater = (
  stored: { updated_at: number },
  plan: { values: { updated_at: number } },
): boolean => Number(stored.updated_at) > Number(plan.values.updated_at);

/** Stands for "an unusable password" until the stored row is known. */
const unusable = "!unusable!";

const domainOf = (email: string): string => email.slice(email.lastIndexOf("@") + 1);

/** What makes userli alias rows one address here (trimmed, any case). */
const groupKey = (source: SourceValue | undefined): string =>
  String(source ?? "")
    .trim()
    .toLowerCase();

export class UserliImporter {
  readonly #source: UserliSource;
  readonly #db: Kysely<Database>;
  readonly #dryRun: boolean;
  readonly #strict: boolean;
  readonly #batch: number;
  readonly #progress: (progress: ImportProgress) => void;
  readonly #report: ImportReport;
  #totals = new Map<string, number>();

  // What earlier tables brought, for the references of later ones (userli ids -> our keys).
  readonly #domainBySourceId = new Map<string, string>();
  readonly #domainIds = new Map<string, number>();
  readonly #userBySourceId = new Map<string, string>();
  readonly #refusedUsers = new Set<string>();
  /** Active users' addresses and active aliases' sources of this import: what may hold a key. */
  readonly #heldAddresses = new Set<string>();
  /** userli voucher id -> the user it invited (users.invitation_voucher_id). */
  readonly #invitees = new Map<string, { email: string | null; userId: string }>();

  /** What each user's backup codes are keyed with (UserService.backupCodeKey). */
  readonly #backupCodeKey: (user: { email: string }) => BackupCodeKey;

  constructor(
    source: UserliSource,
    db: Kysely<Database>,
    backupCodeKey: (user: { email: string }) => BackupCodeKey,
    options: UserliImportOptions = {},
  ) {
    this.#source = source;
    this.#db = db;
    this.#backupCodeKey = backupCodeKey;
    this.#dryRun = options.dryRun ?? false;
    this.#strict = options.strict ?? false;
    this.#batch = Math.max(1, Math.min(options.batchSize ?? 500, 1000));
    this.#progress = options.onProgress ?? (() => {});
    this.#report = {
      dryRun: this.#dryRun,
      tables: [],
      refused: [],
      adjusted: [],
      kept: [],
      skippedTables: [],
      stoppedAt: null,
    };
  }

  async run(): Promise<ImportReport> {
    await this.#checkSchema();
    try {
      await this.#domains();
      await this.#users();
      await this.#aliases();
      await this.#vouchers();
      await this.#reservedNames();
      await this.#openPgpKeys();
      await this.#apiTokens();
      await this.#settings();
      await this.#webhooks();
    } catch (error) {
      if (!(error instanceof StrictStop)) throw error;
    }
    for (const [table, why] of Object.entries(skippedTables)) {
      if ((await this.#source.columns(table)) === null) continue;
      const rows = await this.#source.count(table);
      if (rows > 0) this.#report.skippedTables.push({ table, rows, why });
    }
    return this.#report;
  }

  /** userli's final schema, or a clear word on what is missing. */
  async #checkSchema(): Promise<void> {
    for (const [table, columns] of Object.entries(sourceTables)) {
      const present = await this.#source.columns(table);
      if (present === null) {
        if ((await this.#source.columns(`virtual_${table}`)) !== null)
          throw new Error(
            `the userli tables still have the virtual_ prefix (virtual_${table}): bring userli to 6.x first (bin/console doctrine:migrations:migrate)`,
          );
        throw new Error(`not a userli 6.x database: table ${table} is missing`);
      }
      const missing = columns.filter((c) => !present.has(c));
      if (missing.length > 0)
        throw new Error(
          `not a userli 6.x database (or not migrated to the end): ${table} lacks ${missing.join(", ")}`,
        );
      this.#totals.set(table, await this.#source.count(table));
    }
  }

  // -------------------------------------------------------------------------------------------
  // The tables

  async #domains(): Promise<void> {
    const summary = this.#table("domains", "domains");
    const seen = new Map<string, string>();
    await this.#each("domains", ["id"], summary, async (page) => {
      const plans: Plan<"domains">[] = [];
      for (const row of page) {
        const plan = this.#plan(summary, row, (): Plan<"domains"> => {
          const check = checkDomain(text(row.name)?.trim(), "known");
          if (!check.ok) return refuse(`name: ${check.reason}`);
          const name = check.domain;
          const earlier = seen.get(name);
          if (earlier !== undefined) refuse(`same domain as domains row ${earlier}`);
          const invitations = this.#invitations(String(row.id), row);
          const created = requiredTime(row, "creation_time");
          seen.set(name, String(row.id));
          return {
            sourceId: String(row.id),
            key: name,
            values: {
              name,
              invitation_enabled: flagValue(invitations.enabled),
              invitation_limit: invitations.limit,
              invitation_waiting_period_days: invitations.waitingPeriodDays,
              created_at: created,
              updated_at: time(row, "updated_time") ?? created,
            },
          };
        });
        if (plan) {
          plans.push(plan);
          this.#domainBySourceId.set(plan.sourceId, plan.key);
        }
      }
      await this.#write(summary, "domains", "name", plans);
    });
    for (const row of await this.#db.selectFrom("domains").select(["id", "name"]).execute())
      this.#domainIds.set(String(row.name), Number(row.id));
  }

  /**
   * A domain's invitation settings by the service's rule (checkInvitations). Out of its range they
   * are brought into it and said so: a domain is never refused over them (its users would be too).
   */
  #invitations(id: string, row: UserliRow<"domains">): DomainInvitations {
    const enabled = sourceFlag(row.invitation_enabled);
    const limit = integer(row.invitation_limit) ?? 0;
    const waiting = integer(row.invitation_waiting_period_days) ?? 7;
    try {
      const checked = checkInvitations({ enabled, limit, waitingPeriodDays: waiting });
      return {
        enabled,
        limit: checked.limit ?? limit,
        waitingPeriodDays: checked.waitingPeriodDays ?? waiting,
      };
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      const clamp = (n: number, min: number, max: number) =>
        Number.isFinite(n) ? Math.min(max, Math.max(min, n)) : min;
      const fixed = {
        enabled,
        limit: clamp(limit, 0, maxInvitationLimit),
        waitingPeriodDays: clamp(waiting, 1, maxWaitingPeriodDays),
      };
      this.#adjust(
        "domains",
        id,
        `invitation limit ${limit} and waiting period ${waiting} days brought into range: ${fixed.limit} and ${fixed.waitingPeriodDays} (${error.message})`,
      );
      return fixed;
    }
  }

  async #users(): Promise<void> {
    const summary = this.#table("users", "users");
    const seen = new Map<string, string>();
    const schemes = new Map<string, number>();
    let backupCodesLeftOut = 0;
    let lastLoginFromUpdate = 0;
    const importedDomains = new Set(this.#domainBySourceId.values());
    let writing: Promise<unknown> = Promise.resolve();
    try {
      await this.#each("users", ["id"], summary, async (page) => {
        const plans: Plan<"users">[] = [];
        const codesOf = new Map<Plan<"users">, string[]>();
        for (const row of page) {
          const id = String(row.id);
          let codes: string[] = [];
          const plan = this.#plan(summary, row, (): Plan<"users"> => {
            const address = checkAddress(text(row.email)?.trim(), "known");
            if (!address.ok) return refuse(`email: ${address.reason}`);
            const email = address.address.email;
            refuseWildcard("email", email);
            const earlier = seen.get(email);
            if (earlier !== undefined) refuse(`same address as users row ${earlier}`);
            if (!importedDomains.has(address.address.domain))
              refuse(`the address's domain ${address.address.domain} is not imported`);
            const deleted = sourceFlag(row.deleted);
            let password = text(row.password) ?? "";
            const scheme = passwordHashScheme(password);
            if (scheme === null) {
              // A deleted account keeps its address taken; nobody signs in with it anyway.
              if (!deleted)
                refuse("password: a hash in an unknown format (not Argon2, SHA-crypt, MD5-crypt or bcrypt)");
              password = unusable;
              this.#adjust(
                "users",
                id,
                "deleted user: password hash in an unknown format, stored as unusable",
              );
            } else schemes.set(scheme, (schemes.get(scheme) ?? 0) + 1);
            const roleList = sourceList(row.roles) ?? refuse("roles: not a list");
            const unknownRole = roleList.find((r) => typeof r !== "string" || !isRole(r));
            if (unknownRole !== undefined) refuse(`roles: unknown role ${String(unknownRole).slice(0, 60)}`);
            const quota = checked(() => checkQuota(integer(row.quota)));
            const smtp = smtpLimits(row.smtp_quota_limits);
            const totpSecret = text(row.totp_secret)?.trim() || null;
            if (totpSecret !== null) {
              const list = sourceList(row.totp_backup_codes) ?? refuse("totp_backup_codes: not a list");
              const strings = list.filter(
                (c): c is string | number => typeof c === "string" || typeof c === "number",
              );
              codes = [...new Set(strings.map(String).filter((c) => /^\d{6}$/.test(c)))];
              backupCodesLeftOut += list.length - codes.length;
            }
            const created = requiredTime(row, "creation_time");
            const updated = time(row, "updated_time") ?? created;
            // userli counts a user who never signed in as inactive from its last update, this service
            // from its creation: the day of that update as last login keeps userli's clock, so no
            // account is deleted (or listed to the janitor) for having moved.
            let lastLogin = time(row, "last_login_time");
            if (lastLogin === null && !deleted) {
              lastLogin = activityDay(updated);
              lastLoginFromUpdate++;
            }
            seen.set(email, id);
            const voucher = text(row.invitation_voucher_id);
            if (voucher !== null) this.#invitees.set(voucher, { email, userId: id });
            return {
              sourceId: id,
              key: email,
              values: {
                email,
                domain_id: this.#domainIds.get(address.address.domain) ?? -1,
                password,
                roles: JSON.stringify(normalizeRoles(roleList as string[])),
                password_change_required: flagValue(sourceFlag(row.password_change_required)),
                quota,
                smtp_quota_per_hour: smtp.perHour,
                smtp_quota_per_day: smtp.perDay,
                mail_crypt: flagValue(sourceFlag(row.mail_crypt)),
                mail_crypt_public_key: text(row.mail_crypt_public_key) || null,
                mail_crypt_secret_box: text(row.mail_crypt_secret_box) || null,
                recovery_secret_box: text(row.recovery_secret_box) || null,
                recovery_start_time: time(row, "recovery_start_time"),
                totp_secret: totpSecret,
                totp_confirmed: flagValue(sourceFlag(row.totp_confirmed)),
                totp_backup_codes: "[]",
                last_login_time: lastLogin,
                created_at: created,
                updated_at: updated,
                deleted: flagValue(deleted),
                totp_last_step: null,
              },
              insertOnly: ["totp_last_step"],
            };
          });
          if (plan) {
            plans.push(plan);
            this.#userBySourceId.set(id, plan.key);
            if (plan.values.deleted === 0) this.#heldAddresses.add(plan.key);
            if (codes.length > 0) codesOf.set(plan, codes);
          } else {
            this.#refusedUsers.add(id);
            const voucher = text(row.invitation_voucher_id);
            if (voucher !== null) this.#invitees.set(voucher, { email: null, userId: id });
          }
        }
        const prepare = async (plan: Plan<"users">, stored: Selectable<UserTable> | undefined) => {
          // A password nobody can use is made once; a later run keeps the one stored.
          if (plan.values.password === unusable)
            plan.values.password =
              stored !== undefined && passwordHashScheme(stored.password) === null
                ? stored.password
                : unusablePassword();
          const codes = codesOf.get(plan);
          if (!codes) return;
          const key = this.#backupCodeKey({ email: plan.key });
          // Unchanged codes keep their stored hashes (legacy scrypt ones included, so a later run
          // is no update).
          if (stored && (await sameBackupCodes(codes, stored.totp_backup_codes, key))) {
            plan.values.totp_backup_codes = stored.totp_backup_codes;
          } else if (this.#dryRun) {
            plan.values.totp_backup_codes = "(backup codes to be hashed)";
          } else {
            plan.values.totp_backup_codes = JSON.stringify(codes.map((code) => hashBackupCode(code, key)));
          }
        };
        // A pipeline of two batches: this batch's stored rows are read and its backup codes hashed
        // while the previous batch is written.
        const ready = this.#stored("users", "email", plans, prepare);
        ready.catch(() => {});
        await writing;
        writing = ready.then((prepared) =>
          this.#apply(summary, "users", "email", prepared, changedHereLater),
        );
        writing.catch(() => {});
      });
      await writing;
    } finally {
      // A batch still being written (--strict stopped, or an error) is finished or failed first.
      await writing.catch(() => {});
    }
    const legacy = [...schemes].filter(([scheme]) => scheme !== "argon2id");
    summary.notes.push(
      `password hashes: ${[...schemes].map(([s, n]) => `${n} ${s}`).join(", ") || "none"}` +
        (legacy.length > 0 ? " (other than Argon2id: upgraded at each user's next sign-in)" : ""),
    );
    if (lastLoginFromUpdate > 0)
      summary.notes.push(
        `${lastLoginFromUpdate} active users without a last login: the day of their last update in userli is taken as last login, so inactivity counts from there, as in userli`,
      );
    if (backupCodesLeftOut > 0)
      summary.notes.push(`${backupCodesLeftOut} TOTP backup codes left out (not six digits, or repeated)`);
  }

  async #aliases(): Promise<void> {
    const summary = this.#table("aliases", "aliases");
    const importedDomains = new Set(this.#domainBySourceId.values());
    const users = new Set(this.#userBySourceId.values());
    const seen = new Map<string, string>();
    let merged = 0;
    let plans: AliasPlan[] = [];
    const flush = async () => {
      const batch = plans;
      plans = [];
      if (batch.length === 0) return;
      // Addresses of users that are not part of this import (already in this service).
      const taken = new Set(
        (
          await this.#db
            .selectFrom("users")
            .select("email")
            .where(
              "email",
              "in",
              batch.map((p) => p.key),
            )
            .execute()
        ).map((r) => String(r.email)),
      );
      const kept = batch.filter((plan) => {
        if (!taken.has(plan.key)) return true;
        this.#refuse(summary, plan.sourceId, "the address belongs to a user");
        return false;
      });
      const owners = await this.#userIds(kept.map((p) => p.owner));
      for (const plan of kept)
        plan.values.user_id = plan.owner === null ? null : (owners.get(plan.owner) ?? -1);
      await this.#write(summary, "aliases", "source", kept, undefined, changedHereLater);
    };
    const take = async (rows: UserliRow<"aliases">[]) => {
      if (rows.length === 0) return;
      const plan = this.#planAlias(summary, rows, { importedDomains, users, seen });
      if (plan) {
        plans.push(plan);
        if (rows.length > 1) merged += rows.length;
        if (plan.values.deleted === 0) this.#heldAddresses.add(plan.key);
      }
      if (plans.length >= this.#batch) await flush();
    };
    // The rows of one address (userli keeps one row per destination) are taken together. They are
    // not read ordered by address: userli has no index that serves that order, so each page would
    // sort the rest of the table (time growing with the square of the aliases). A first pass over
    // the ids and addresses alone counts each address's rows; the rows are then read by id, and an
    // address of several rows waits until its last row has come.
    const rowsOf = new Map<string, number>();
    for await (const page of this.#source.pages("aliases", ["id", "source"], ["id"], 1000))
      for (const row of page) {
        const key = groupKey(row.source);
        rowsOf.set(key, (rowsOf.get(key) ?? 0) + 1);
      }
    for (const [key, rows] of rowsOf) if (rows === 1) rowsOf.delete(key);
    const waiting = new Map<string, UserliRow<"aliases">[]>();
    await this.#each("aliases", ["id"], summary, async (page) => {
      for (const row of page) {
        const key = groupKey(row.source);
        const expected = rowsOf.get(key);
        if (expected === undefined) {
          await take([row]);
          continue;
        }
        const group = waiting.get(key) ?? [];
        group.push(row);
        if (group.length < expected) waiting.set(key, group);
        else {
          waiting.delete(key);
          await take(group);
        }
      }
    });
    // Both passes read one snapshot, so none is left waiting; should one be, it is still taken.
    for (const group of waiting.values()) await take(group);
    await flush();
    if (merged > 0)
      summary.notes.push(
        `${merged} rows of addresses with several destinations merged into one alias each (userli keeps a row per destination)`,
      );
  }

  /** The rows of one alias address, merged into the one alias this service keeps per address. */
  #planAlias(
    summary: TableSummary,
    rows: UserliRow<"aliases">[],
    context: { importedDomains: Set<string>; users: Set<string>; seen: Map<string, string> },
  ): AliasPlan | null {
    interface Part {
      id: string;
      deleted: boolean;
      destination: string | null;
      owner: string | null;
      row: UserliRow<"aliases">;
      smtp: { perHour: number | null; perDay: number | null };
      created: number;
      updated: number;
    }
    const parts: Part[] = [];
    let email: string | null = null;
    for (const row of rows) {
      const id = String(row.id);
      const part = this.#plan(summary, row, (): Part => {
        const address = checkAddress(text(row.source)?.trim(), "known");
        if (!address.ok) return refuse(`source: ${address.reason}`);
        const source = address.address.email;
        refuseWildcard("source", source);
        const earlier = context.seen.get(source);
        if (earlier !== undefined) refuse(`same address as aliases row ${earlier}`);
        if (!context.importedDomains.has(address.address.domain))
          refuse(`the address's domain ${address.address.domain} is not imported`);
        if (context.users.has(source)) refuse("the address belongs to a user");
        const deleted = sourceFlag(row.deleted);
        let destination: string | null = null;
        const rawDestination = text(row.destination)?.trim();
        if (!deleted && rawDestination) {
          const check = checkAddress(rawDestination, "known");
          if (!check.ok) refuse(`destination ${rawDestination.slice(0, 100)}: ${check.reason}`);
          else destination = check.address.email;
        }
        let owner: string | null = null;
        const ownerId = text(row.user_id);
        if (!deleted && ownerId !== null) {
          owner = this.#userBySourceId.get(ownerId) ?? null;
          if (owner === null)
            refuse(
              this.#refusedUsers.has(ownerId)
                ? `its owner (users row ${ownerId}) is refused`
                : `its owner (users row ${ownerId}) does not exist`,
            );
        }
        const note = text(row.note);
        if (note !== null && note.length > 255) refuse("note: longer than 255 characters");
        const created = requiredTime(row, "creation_time");
        if (email !== null && email !== source) refuse(`same address as aliases row ${parts[0]?.id}`);
        email = source;
        return {
          id,
          deleted,
          destination,
          owner,
          row,
          smtp: smtpLimits(row.smtp_quota_limits),
          created,
          updated: time(row, "updated_time") ?? created,
        };
      });
      if (part) parts.push(part);
    }
    const first = parts[0];
    if (!first || email === null) return null;
    context.seen.set(email, first.id);
    const active = parts.filter((p) => !p.deleted);
    const lead = active[0] ?? first;
    const destinations: string[] = [];
    for (const part of active) {
      const target = part.destination ?? part.owner;
      if (target !== null && !destinations.includes(target)) destinations.push(target);
    }
    let deleted = active.length === 0;
    if (!deleted && destinations.length === 0) {
      // userli resolves such an alias to nothing; a deleted alias does the same and keeps the address taken.
      deleted = true;
      this.#adjust("aliases", lead.id, "active alias without a destination or owner: imported as deleted");
    }
    const owners = new Set(active.map((p) => p.owner).filter((o) => o !== null));
    if (owners.size > 1)
      this.#adjust(
        "aliases",
        lead.id,
        `rows ${active.map((p) => p.id).join(", ")} of ${email} have different owners; the owner of row ${active.find((p) => p.owner !== null)?.id} is kept`,
      );
    const notes = active.map((p) => text(p.row.note)).filter((n): n is string => !!n);
    if (new Set(notes).size > 1)
      this.#adjust("aliases", lead.id, `rows of ${email} have different notes; the first is kept`);
    return {
      sourceId: lead.id,
      key: email,
      owner: deleted ? null : (active.find((p) => p.owner !== null)?.owner ?? null),
      values: {
        source: email,
        domain_id: this.#domainIds.get(domainOf(email)) ?? -1,
        destinations: JSON.stringify(deleted ? [] : destinations),
        user_id: null,
        smtp_quota_per_hour: lead.smtp.perHour,
        smtp_quota_per_day: lead.smtp.perDay,
        random: flagValue(sourceFlag(lead.row.random)),
        note: notes[0] ?? null,
        created_at: Math.min(...parts.map((p) => p.created)),
        updated_at: Math.max(...parts.map((p) => p.updated)),
        deleted: flagValue(deleted),
      },
    };
  }

  async #vouchers(): Promise<void> {
    const summary = this.#table("vouchers", "invite_codes");
    /** The addresses of its owner and invitee are made this service's user ids when the batch is written. */
    type CodePlan = Plan<"invite_codes"> & { owner: string | null; invitee: string | null };
    const seen = new Map<string, string>();
    await this.#each("vouchers", ["id"], summary, async (page) => {
      const plans: CodePlan[] = [];
      for (const row of page) {
        const id = String(row.id);
        const plan = this.#plan(summary, row, (): CodePlan => {
          const code = text(row.code)?.trim() ?? "";
          if (!legacyInviteCodePattern.test(code))
            refuse("code: not six letters and digits (the invite codes this service looks up)");
          // Codes are unique whatever their case.
          const earlier = seen.get(code.toLowerCase());
          if (earlier !== undefined) refuse(`same code as vouchers row ${earlier}`);
          const domain = this.#domainBySourceId.get(String(row.domain_id));
          if (domain === undefined) refuse(`its domain (domains row ${row.domain_id}) is not imported`);
          const ownerId = text(row.user_id);
          const owner = ownerId === null ? null : (this.#userBySourceId.get(ownerId) ?? null);
          if (ownerId !== null && owner === null)
            refuse(
              this.#refusedUsers.has(ownerId)
                ? `its owner (users row ${ownerId}) is refused`
                : `its owner (users row ${ownerId}) does not exist`,
            );
          const invitee = this.#invitees.get(id);
          if (invitee && invitee.email === null)
            this.#adjust(
              "vouchers",
              id,
              `its invitee (users row ${invitee.userId}) is refused: imported without it`,
            );
          seen.set(code.toLowerCase(), id);
          return {
            sourceId: id,
            key: code,
            values: {
              code,
              domain_id: this.#domainIds.get(domain as string) ?? -1,
              user_id: null,
              redeemed_at: time(row, "redeemed_time"),
              redeemed_by_id: null,
              created_at: requiredTime(row, "creation_time"),
            },
            owner,
            invitee: invitee?.email ?? null,
          };
        });
        if (plan) plans.push(plan);
      }
      const ids = await this.#userIds(plans.flatMap((p) => [p.owner, p.invitee]));
      const idOf = (email: string | null) => (email === null ? null : (ids.get(email) ?? -1));
      for (const plan of plans) {
        plan.values.user_id = idOf(plan.owner);
        plan.values.redeemed_by_id = idOf(plan.invitee);
      }
      await this.#write(summary, "invite_codes", "code", plans);
    });
  }

  async #reservedNames(): Promise<void> {
    const summary = this.#table("reserved_names", "reserved_names");
    const seen = new Map<string, string>();
    await this.#each("reserved_names", ["id"], summary, async (page) => {
      const plans: Plan<"reserved_names">[] = [];
      for (const row of page) {
        const plan = this.#plan(summary, row, (): Plan<"reserved_names"> => {
          const name =
            normalizeReservedName(text(row.name)) ??
            refuse("name: not a local part a new address could have (letters, digits and . _ + = -)");
          const earlier = seen.get(name);
          if (earlier !== undefined) refuse(`same name as reserved_names row ${earlier}`);
          seen.set(name, String(row.id));
          const created = requiredTime(row, "creation_time");
          return {
            sourceId: String(row.id),
            key: name,
            values: { name, created_at: created, updated_at: time(row, "updated_time") ?? created },
          };
        });
        if (plan) plans.push(plan);
      }
      await this.#write(summary, "reserved_names", "name", plans);
    });
  }

  async #openPgpKeys(): Promise<void> {
    const summary = this.#table("openpgp_keys", "openpgp_keys");
    /** The uploader's address is made this service's user id when the batch is written. */
    type KeyPlan = Plan<"openpgp_keys"> & { uploader: string | null };
    const importedDomains = new Set(this.#domainBySourceId.values());
    const now = Math.floor(Date.now() / 1000);
    await this.#each("openpgp_keys", ["id"], summary, async (page) => {
      const plans: KeyPlan[] = [];
      for (const row of page) {
        const id = String(row.id);
        const plan = this.#plan(summary, row, (): KeyPlan => {
          const address = checkAddress(text(row.email)?.trim(), "known");
          if (!address.ok) return refuse(`email: ${address.reason}`);
          const { email, localPart, domain } = address.address;
          if (!importedDomains.has(domain)) refuse(`the address's domain ${domain} is not imported`);
          if (!this.#heldAddresses.has(email))
            refuse("no active user or alias of the import has this address");
          const keyId = (text(row.key_id) ?? "").trim().toUpperCase();
          if (!/^[0-9A-F]{16}$/.test(keyId)) refuse("key_id: not 16 hexadecimal digits");
          const fingerprint = (text(row.key_fingerprint) ?? "").trim();
          if (fingerprint === "" || fingerprint.length > 64) refuse("key_fingerprint: empty or too long");
          const keyData = (text(row.key_data) ?? "").replace(/\s/g, "");
          if (!BASE64.test(keyData)) refuse("key_data: not base64");
          const hash = wkdHash(localPart);
          const stored = text(row.wkd_hash);
          if (stored !== null && stored !== "" && stored !== hash)
            this.#adjust(
              "openpgp_keys",
              id,
              `wkd_hash ${stored} is not the hash of ${localPart}; ${hash} stored`,
            );
          const uploaderId = text(row.uploader_id);
          const uploader = uploaderId === null ? null : (this.#userBySourceId.get(uploaderId) ?? null);
          if (uploaderId !== null && uploader === null)
            refuse(
              this.#refusedUsers.has(uploaderId)
                ? `its uploader (users row ${uploaderId}) is refused`
                : `its uploader (users row ${uploaderId}) does not exist`,
            );
          return {
            sourceId: id,
            key: email,
            values: {
              email,
              domain_id: this.#domainIds.get(domain) ?? -1,
              key_id: keyId,
              fingerprint,
              expires_at: time(row, "key_expire_time"),
              key_data: keyData,
              wkd_hash: hash,
              uploader_id: null,
              created_at: now,
              updated_at: now,
            },
            uploader,
            // userli keeps no times for keys: the import is when they arrived here.
            insertOnly: ["created_at", "updated_at"],
            onUpdate: { updated_at: now },
          };
        });
        if (plan) plans.push(plan);
      }
      const ids = await this.#userIds(plans.map((p) => p.uploader));
      for (const plan of plans)
        plan.values.uploader_id = plan.uploader === null ? null : (ids.get(plan.uploader) ?? -1);
      await this.#write(summary, "openpgp_keys", "email", plans);
    });
  }

  async #apiTokens(): Promise<void> {
    const summary = this.#table("api_tokens", "api_tokens");
    await this.#each("api_tokens", ["id"], summary, async (page) => {
      const plans: Plan<"api_tokens">[] = [];
      for (const row of page) {
        const plan = this.#plan(summary, row, (): Plan<"api_tokens"> => {
          const name = checked(() => checkTokenName(text(row.name)));
          const list = sourceList(row.scopes) ?? refuse("scopes: not a list");
          const scopes = checked(() => checkScopes(list));
          const hash = (text(row.token) ?? "").trim().toLowerCase();
          if (!/^[0-9a-f]{64}$/.test(hash)) refuse("token: not a SHA-256 hex digest");
          return {
            sourceId: String(row.id),
            key: hash,
            values: {
              name,
              scopes: JSON.stringify(scopes),
              token_hash: hash,
              created_at: requiredTime(row, "creation_time"),
              last_used_at: time(row, "last_used_time"),
            },
          };
        });
        if (plan) plans.push(plan);
      }
      await this.#write(summary, "api_tokens", "token_hash", plans);
    });
  }

  async #settings(): Promise<void> {
    const summary = this.#table("settings", "settings");
    await this.#each("settings", ["id"], summary, async (page) => {
      const plans: Plan<"settings">[] = [];
      const defaults: { id: string; name: string }[] = [];
      for (const row of page) {
        const plan = this.#plan(summary, row, (): Plan<"settings"> | null => {
          const name = text(row.name)?.trim() ?? "";
          if (!isSettingName(name)) refuse(`unknown setting ${name.slice(0, 60)}`);
          if (row.value === null) {
            // No value: userli uses the default, and so does this service without a row.
            defaults.push({ id: String(row.id), name });
            return null;
          }
          const value = checked(() => normalizeSetting(name, String(row.value)));
          return {
            sourceId: String(row.id),
            key: name,
            values: {
              name,
              value,
              updated_at: time(row, "updated_time") ?? requiredTime(row, "creation_time"),
            },
          };
        });
        if (plan) plans.push(plan);
      }
      await this.#write(summary, "settings", "name", plans);
      if (defaults.length === 0) return;
      const names = defaults.map((d) => d.name);
      const stored = await this.#db
        .selectFrom("settings")
        .select("name")
        .where("name", "in", names)
        .execute();
      summary.updated += stored.length;
      summary.unchanged += defaults.length - stored.length;
      if (!this.#dryRun && stored.length > 0)
        await this.#db.deleteFrom("settings").where("name", "in", names).execute();
    });
  }

  async #webhooks(): Promise<void> {
    const summary = this.#table("webhook_endpoints", "webhook_endpoints");
    const filters = new Map<string, string[]>();
    for await (const page of this.#source.pages(
      "webhook_endpoint_domain",
      sourceTables.webhook_endpoint_domain,
      ["webhook_endpoint_id", "domain_id"],
      1000,
    )) {
      for (const row of page) {
        const id = String(row.webhook_endpoint_id);
        filters.set(id, [...(filters.get(id) ?? []), String(row.domain_id)]);
      }
    }
    const ordinal = new Map<string, number>();
    type EndpointPlan = Plan<"webhook_endpoints"> & { domains: number[] };
    const plans: EndpointPlan[] = [];
    for await (const page of this.#source.pages(
      "webhook_endpoints",
      sourceTables.webhook_endpoints,
      ["id"],
      this.#batch,
    )) {
      for (const row of page) {
        summary.read++;
        const id = String(row.id);
        const plan = this.#plan(summary, row, (): EndpointPlan => {
          const url = checked(() => checkUrl(text(row.url)?.trim()));
          const listed = sourceList(row.events) ?? refuse("events: not a list");
          // userli sends every event to an endpoint without a list; this service wants them named.
          const events = checked(() => checkEvents(listed.length === 0 ? [...webhookEvents] : listed));
          const secret = checked(() => checkSecret(text(row.secret)));
          const domainIds: number[] = [];
          const sourceDomains = filters.get(id) ?? [];
          const missing = sourceDomains.filter((d) => !this.#domainBySourceId.has(d));
          if (sourceDomains.length > 0 && missing.length === sourceDomains.length)
            refuse("none of its domains is imported (without them it would receive every domain's events)");
          if (missing.length > 0)
            this.#adjust(
              "webhook_endpoints",
              id,
              `domains rows ${missing.join(", ")} are not imported: left out of its filter`,
            );
          for (const d of sourceDomains) {
            const name = this.#domainBySourceId.get(d);
            const domainId = name === undefined ? undefined : this.#domainIds.get(name);
            if (domainId !== undefined && !domainIds.includes(domainId)) domainIds.push(domainId);
          }
          const created = requiredTime(row, "creation_time");
          // An endpoint has no name: the nth endpoint with a URL is the nth here with that URL.
          const nth = (ordinal.get(url) ?? 0) + 1;
          ordinal.set(url, nth);
          return {
            sourceId: id,
            key: `${nth}\n${url}`,
            domains: domainIds.sort((a, b) => a - b),
            values: {
              url,
              secret,
              events: JSON.stringify(events),
              enabled: flagValue(sourceFlag(row.enabled)),
              created_at: created,
              updated_at: time(row, "updated_time") ?? created,
            },
          };
        });
        if (plan) plans.push(plan);
      }
    }
    const stored = await this.#db.selectFrom("webhook_endpoints").selectAll().orderBy("id").execute();
    const storedFilters = await this.#db.selectFrom("webhook_endpoint_domains").selectAll().execute();
    const byKey = new Map<string, Selectable<WebhookEndpointTable>>();
    const count = new Map<string, number>();
    for (const row of stored) {
      const nth = (count.get(String(row.url)) ?? 0) + 1;
      count.set(String(row.url), nth);
      byKey.set(`${nth}\n${row.url}`, row);
    }
    const apply = async (db: Kysely<Database>) => {
      for (const plan of plans) {
        const existing = byKey.get(plan.key);
        const domains = existing
          ? storedFilters
              .filter((f) => Number(f.endpoint_id) === Number(existing.id))
              .map((f) => Number(f.domain_id))
              .sort((a, b) => a - b)
          : [];
        const changed = existing ? changedColumns(existing, plan.values) : [];
        const domainsChanged = domains.join(",") !== plan.domains.join(",");
        if (existing && changed.length === 0 && !domainsChanged) {
          summary.unchanged++;
          continue;
        }
        if (existing) summary.updated++;
        else summary.added++;
        if (this.#dryRun) continue;
        let id: number;
        if (existing) {
          id = Number(existing.id);
          if (changed.length > 0)
            await db
              .updateTable("webhook_endpoints")
              .set(pick(plan.values, changed))
              .where("id", "=", id)
              .execute();
        } else {
          await db.insertInto("webhook_endpoints").values(plan.values).execute();
          const row = await db
            .selectFrom("webhook_endpoints")
            .select("id")
            .where("url", "=", plan.values.url)
            .orderBy("id", "desc")
            .executeTakeFirstOrThrow();
          id = Number(row.id);
        }
        if (domainsChanged || !existing) {
          await db.deleteFrom("webhook_endpoint_domains").where("endpoint_id", "=", id).execute();
          if (plan.domains.length > 0)
            await db
              .insertInto("webhook_endpoint_domains")
              .values(plan.domains.map((domain_id) => ({ endpoint_id: id, domain_id })))
              .execute();
        }
      }
    };
    if (this.#dryRun) await apply(this.#db);
    else await this.#db.transaction().execute((trx) => apply(trx));
    this.#progressOf("webhook_endpoints", summary.read);
  }

  // -------------------------------------------------------------------------------------------
  // Batches

  #table(table: SourceTable, target: string): TableSummary {
    const summary = newSummary(table, target);
    this.#report.tables.push(summary);
    return summary;
  }

  /** Each page of a source table in turn; `--strict` stops before a page with a refused row is written. */
  async #each<T extends SourceTable>(
    table: T,
    orderBy: SourceColumn<T>[],
    summary: TableSummary,
    handle: (page: UserliRow<T>[]) => Promise<void>,
  ): Promise<void> {
    for await (const page of this.#source.pages(table, sourceColumns[table], orderBy, this.#batch)) {
      summary.read += page.length;
      await handle(page);
      this.#progressOf(table, summary.read);
    }
  }

  /** A table's progress, and the whole import's: the rows read of all tables that have rows of their own. */
  #progressOf(table: SourceTable, done: number): void {
    let allTotal = 0;
    for (const [name, rows] of this.#totals) if (name !== "webhook_endpoint_domain") allTotal += rows;
    const allDone = this.#report.tables.reduce((n, t) => n + t.read, 0);
    this.#progress({ table, done, total: this.#totals.get(table) ?? 0, allDone, allTotal });
  }

  /** A row's plan, or null with the row reported as refused. */
  #plan<T>(summary: TableSummary, row: { id: SourceValue }, make: () => T | null): T | null {
    try {
      return make();
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      this.#refuse(summary, String(row.id), error.message);
      return null;
    }
  }

  #refuse(summary: TableSummary, id: string, reason: string): void {
    summary.refused++;
    const note: RowNote = { table: summary.table, id, reason };
    this.#report.refused.push(note);
    if (this.#strict) {
      this.#report.stoppedAt = note;
      throw new StrictStop();
    }
  }

  #adjust(table: string, id: string, reason: string): void {
    this.#report.adjusted.push({ table, id, reason });
  }

  /** This service's ids of users named by address (the addresses of this import's users). */
  async #userIds(emails: (string | null)[]): Promise<Map<string, number>> {
    const wanted = [...new Set(emails.filter((e): e is string => e !== null))];
    const ids = new Map<string, number>();
    for (let i = 0; i < wanted.length; i += 500) {
      const rows = await this.#db
        .selectFrom("users")
        .select(["id", "email"])
        .where("email", "in", wanted.slice(i, i + 500))
        .execute();
      for (const row of rows) ids.set(String(row.email), Number(row.id));
    }
    return ids;
  }

  /**
   * Writes one batch in one transaction: each plan is compared with the row stored under its key;
   * new rows are inserted together, changed ones updated column by column, equal ones left alone.
   * `prepare` finishes a plan once its stored row is known (backup codes); a stored row that
   * `keep` says is newer is kept as it is.
   */
  async #write<T extends keyof Database>(
    summary: TableSummary,
    table: T,
    keyColumn: TextColumn<T>,
    plans: Plan<T>[],
    prepare?: (plan: Plan<T>, stored: Selectable<Database[T]> | undefined) => Promise<void>,
    keep?: (stored: Selectable<Database[T]>, plan: Plan<T>) => boolean,
  ): Promise<Written> {
    return this.#apply(summary, table, keyColumn, await this.#stored(table, keyColumn, plans, prepare), keep);
  }

  /** The rows stored under the plans' keys, and the plans finished by `prepare`. */
  async #stored<T extends keyof Database>(
    table: T,
    keyColumn: TextColumn<T>,
    plans: Plan<T>[],
    prepare?: (plan: Plan<T>, stored: Selectable<Database[T]> | undefined) => Promise<void>,
  ): Promise<{ plans: Plan<T>[]; stored: Map<string, Selectable<Database[T]>> }> {
    const stored = new Map<string, Selectable<Database[T]>>();
    if (plans.length === 0) return { plans, stored };
    const rows = await rowsByKey(
      this.#db,
      table,
      keyColumn,
      plans.map((p) => p.key),
    );
    for (const row of rows) {
      const columns: Readonly<Record<string, unknown>> = row;
      stored.set(String(columns[keyColumn]), row);
    }
    if (prepare) await Promise.all(plans.map((plan) => prepare(plan, stored.get(plan.key))));
    return { plans, stored };
  }

  async #apply<T extends keyof Database>(
    summary: TableSummary,
    table: T,
    keyColumn: TextColumn<T>,
    { plans, stored }: { plans: Plan<T>[]; stored: Map<string, Selectable<Database[T]>> },
    keep?: (stored: Selectable<Database[T]>, plan: Plan<T>) => boolean,
  ): Promise<Written> {
    const written: Written = { added: 0, updated: 0, unchanged: 0 };
    if (plans.length === 0) return written;
    const inserts: Insertable<Database[T]>[] = [];
    const updates: { key: string; changes: Partial<Insertable<Database[T]>> }[] = [];
    for (const plan of plans) {
      const existing = stored.get(plan.key);
      if (!existing) {
        inserts.push(plan.values);
        continue;
      }
      const changed = changedColumns(existing, plan.values, plan.insertOnly);
      if (changed.length === 0) {
        written.unchanged++;
        continue;
      }
      if (keep?.(existing, plan)) {
        written.unchanged++;
        this.#report.kept.push({
          table: summary.table,
          id: plan.sourceId,
          reason: `${plan.key}: changed here after userli's last change (${changed.join(", ")} differ)`,
        });
        continue;
      }
      updates.push({ key: plan.key, changes: { ...pick(plan.values, changed), ...plan.onUpdate } });
    }
    written.added = inserts.length;
    written.updated = updates.length;
    summary.added += written.added;
    summary.updated += written.updated;
    summary.unchanged += written.unchanged;
    if (this.#dryRun || (inserts.length === 0 && updates.length === 0)) return written;
    await this.#db.transaction().execute(async (trx) => {
      await insertRows(trx, table, inserts);
      for (const update of updates) await updateByKey(trx, table, keyColumn, update.key, update.changes);
    });
    return written;
  }
}

/** Do these plain codes match these stored hashes, one for one? (scrypt: only when the counts agree) */
async function sameBackupCodes(codes: string[], storedJson: string, key: BackupCodeKey): Promise<boolean> {
  let hashes: unknown;
  try {
    hashes = JSON.parse(storedJson);
  } catch {
    return false;
  }
  if (!Array.isArray(hashes) || hashes.length !== codes.length) return false;
  const results = await Promise.all(
    codes.map((code, i) => findBackupCode(code, [String(hashes[i as number] ?? "")], key)),
  );
  return results.every((index) => index === 0);
}
