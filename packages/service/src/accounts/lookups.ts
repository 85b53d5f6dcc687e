import { type Kysely, sql } from "kysely";
import { preparedByKey } from "../db/prepared.ts";
import type { Database } from "../db/schema.ts";
import { flag, toFlag } from "../db/schema.ts";
import { andThen, type Eventually } from "../eventually.ts";
import { type Address, parseDomain } from "./addresses.ts";
import { reportsMailCrypt } from "./mail-crypt.ts";
import { decodeSetting, type SettingsService, storedSetting } from "./settings.ts";
import { parseStringList } from "./users.ts";

export interface UserdbEntry {
  user: string;
  mailCrypt: 0 | 2;
  mailCryptPublicKey: string;
  quota: string;
}

export interface SmtpQuota {
  per_hour: number;
  per_day: number;
}

const activeFlag = toFlag(false);

/**
 * Read-only questions mail software asks for every message and login. Each is one indexed query
 * (two for senders and smtp_quota), answered from the database so every instance sees every write.
 */
export class LookupService {
  readonly #settings: SettingsService;
  // The per-message lookups, compiled once (see preparedQuery).
  readonly #domainId;
  readonly #activeUserId;
  readonly #userdbRow;
  readonly #smtpQuotaLimits;
  readonly #aliasDestinations;
  readonly #senderSources;

  constructor(db: Kysely<Database>, settings: SettingsService) {
    this.#settings = settings;
    this.#domainId = preparedByKey(db, (name: string) =>
      db.selectFrom("domains").select("id").where("name", "=", name),
    );
    this.#activeUserId = preparedByKey(db, (email: string) =>
      db.selectFrom("users").select("id").where("email", "=", email).where("deleted", "=", activeFlag),
    );
    // The settings these answers depend on are read in the same statement (no extra round trip).
    this.#userdbRow = preparedByKey(db, (email: string) =>
      db
        .selectFrom("users")
        .select(["email", "mail_crypt", "mail_crypt_public_key", "quota"])
        .select(storedSetting(db, "mail_crypt").as("mail_crypt_level"))
        .where("email", "=", email)
        .where("deleted", "=", activeFlag),
    );
    // A user's own limits, else an alias's (both rows come back; the user's wins), with the defaults.
    this.#smtpQuotaLimits = preparedByKey(db, (address: string) => {
      const defaults = [
        storedSetting(db, "smtp_quota_limit_per_hour").as("default_per_hour"),
        storedSetting(db, "smtp_quota_limit_per_day").as("default_per_day"),
      ];
      return db
        .selectFrom("users")
        .select(["smtp_quota_per_hour", "smtp_quota_per_day", sql.lit(0).as("from_alias")])
        .select(defaults)
        .where("email", "=", address)
        .where("deleted", "=", activeFlag)
        .unionAll(
          db
            .selectFrom("aliases")
            .select(["smtp_quota_per_hour", "smtp_quota_per_day", sql.lit(1).as("from_alias")])
            .select(defaults)
            .where("source", "=", address)
            .where("deleted", "=", activeFlag),
        );
    });
    this.#aliasDestinations = preparedByKey(db, (source: string) =>
      db
        .selectFrom("aliases")
        .select("destinations")
        .where("source", "=", source)
        .where("deleted", "=", activeFlag),
    );
    // Whether the address is a mailbox, and its alias destinations, in one statement.
    this.#senderSources = preparedByKey(db, (address: string) =>
      db.selectNoFrom((eb) => [
        eb
          .selectFrom("users")
          .select("id")
          .where("email", "=", address)
          .where("deleted", "=", activeFlag)
          .as("user_id"),
        eb
          .selectFrom("aliases")
          .select("destinations")
          .where("source", "=", address)
          .where("deleted", "=", activeFlag)
          .as("destinations"),
      ]),
    );
  }

  // The per-message lookups answer synchronously when the read does (see eventually.ts). The
  // address lookups take an address already parsed at the edge (a 400 there), so it is not parsed
  // twice per message; isManagedDomain takes any string (MTA-STS asks with a host name's tail).
  // userdb and smtpQuota answer "no such user" with null, not a thrown ServiceError: a third of
  // the keys mail servers ask about are unknown or deleted, and the throw cost more than the read.

  /** Dovecot's userdb: an active user's MailCrypt state and quota (one query, with the setting). */
  userdb(address: Address): Eventually<UserdbEntry | null> {
    return andThen(this.#userdbRow(address.email), ([row]) => {
      if (!row) return null;
      const level = decodeSetting("mail_crypt", row.mail_crypt_level);
      return {
        user: row.email,
        mailCrypt: reportsMailCrypt(level, flag(row.mail_crypt), row.mail_crypt_public_key) ? 2 : 0,
        mailCryptPublicKey: row.mail_crypt_public_key ?? "",
        quota: row.quota === null ? "" : `${row.quota}M`,
      };
    });
  }

  isManagedDomain(rawDomain: string): Eventually<boolean> {
    const name = parseDomain(rawDomain);
    if (!name) return false;
    return andThen(this.#domainId(name), (rows) => rows.length > 0);
  }

  hasMailbox(address: Address): Eventually<boolean> {
    return andThen(this.#activeUserId(address.email), (rows) => rows.length > 0);
  }

  /** Destinations of an alias; postmaster@ and abuse@ of managed domains go where the settings say. */
  aliasDestinations(address: Address): Eventually<string[]> {
    if (address.localPart === "postmaster" || address.localPart === "abuse")
      return this.#roleDestinations(address.localPart, address.domain, address.email);
    return andThen(this.#activeAliasDestinations(address.email), (destinations) => destinations ?? []);
  }

  async #roleDestinations(role: "postmaster" | "abuse", domain: string, email: string): Promise<string[]> {
    const setting = await this.#settings.get(role === "postmaster" ? "postmaster_address" : "abuse_address");
    if (setting !== "" && (await this.isManagedDomain(domain))) return [setting];
    return (await this.#activeAliasDestinations(email)) ?? [];
  }

  /** Logins allowed to send as an address: the mailbox itself, then the alias destinations. */
  senders(address: Address): Eventually<string[]> {
    return andThen(this.#senderSources(address.email), ([row]) => {
      const senders = row?.user_id != null ? [address.email] : [];
      for (const destination of row?.destinations != null ? parseStringList(row.destinations) : [])
        if (!senders.includes(destination)) senders.push(destination);
      return senders;
    });
  }

  smtpQuota(address: Address): Eventually<SmtpQuota | null> {
    return andThen(this.#smtpQuotaLimits(address.email), (rows) => {
      const limits = rows.find((row) => Number(row.from_alias) === 0) ?? rows[0];
      if (!limits) return null;
      return {
        per_hour:
          limits.smtp_quota_per_hour ?? decodeSetting("smtp_quota_limit_per_hour", limits.default_per_hour),
        per_day:
          limits.smtp_quota_per_day ?? decodeSetting("smtp_quota_limit_per_day", limits.default_per_day),
      };
    });
  }

  #activeAliasDestinations(source: string): Eventually<string[] | null> {
    return andThen(this.#aliasDestinations(source), ([row]) =>
      row ? parseStringList(row.destinations) : null,
    );
  }
}
