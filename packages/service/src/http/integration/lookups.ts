import { sql } from "kysely";
import type { Address } from "../../accounts/addresses.ts";
import { reportsMailCrypt } from "../../accounts/mail-crypt-policy.ts";
import { isActiveUser } from "../../accounts/queries.ts";
import { decodeSetting, type SettingsService, storedSetting } from "../../accounts/settings.ts";
import { parseStringList } from "../../accounts/users.ts";
import type { DatabaseHandle } from "../../db/database.ts";
import { type KeyedRead, type KeyReader, keyedRead } from "../../db/key-reads.ts";
import { flag, toFlag } from "../../db/schema.ts";
import type { ApiToken, ApiTokenRow, TokenService } from "../../tokens/tokens.ts";
import { andThen, type Eventually } from "./eventually.ts";

export interface UserdbEntry {
  user: string;
  mailCrypt: 0 | 2;
  mailCryptPublicKey: string;
  quota: string;
}

/** A sender's limits as `/api/mta/smtp_quota` answers them (0 = unlimited). */
export interface SmtpQuotaAnswer {
  per_hour: number;
  per_day: number;
}

const activeFlag = toFlag(false);

// The per-message reads, each written as the batch query it is (db/key-reads.ts): the condition
// `keys` on its key column selects the rows of every key asked for in one go, each row tagged
// with its key. The settings an answer depends on are read in the same statement.

const domainByName: KeyedRead<{ lookup_key: string }> = (db, keys) =>
  db.selectFrom("domains").select("name as lookup_key").where(keys("name"));

const activeUserByEmail: KeyedRead<{ lookup_key: string }> = (db, keys) =>
  db.selectFrom("users").select("email as lookup_key").where(keys("email")).where(isActiveUser);

const userdbByEmail = keyedRead((db, keys) =>
  db
    .selectFrom("users")
    .select(["email as lookup_key", "mail_crypt", "mail_crypt_public_key", "quota"])
    .select(storedSetting(db, "mail_crypt").as("mail_crypt_level"))
    .where(keys("email"))
    .where(isActiveUser),
);

const aliasBySource: KeyedRead<{ lookup_key: string; destinations: string }> = (db, keys) =>
  db
    .selectFrom("aliases")
    .select(["source as lookup_key", "destinations"])
    .where(keys("source"))
    .where("deleted", "=", activeFlag);

/** Whether the address is a mailbox (`from_alias` 0) and its alias destinations (`from_alias` 1). */
const senderSourcesByAddress = keyedRead((db, keys) =>
  db
    .selectFrom("users")
    .select(["email as lookup_key", sql.lit(0).as("from_alias"), sql<string>`'[]'`.as("destinations")])
    .where(keys("email"))
    .where(isActiveUser)
    .unionAll(
      db
        .selectFrom("aliases")
        .select(["source as lookup_key", sql.lit(1).as("from_alias"), "destinations"])
        .where(keys("source"))
        .where("deleted", "=", activeFlag),
    ),
);

/** A user's own limits and an alias's (both rows come back; the user's wins), with the defaults. */
const smtpQuotaByAddress = keyedRead((db, keys) => {
  const defaults = [
    storedSetting(db, "smtp_quota_limit_per_hour").as("default_per_hour"),
    storedSetting(db, "smtp_quota_limit_per_day").as("default_per_day"),
  ];
  return db
    .selectFrom("users")
    .select(["email as lookup_key", "smtp_quota_per_hour", "smtp_quota_per_day", sql.lit(0).as("from_alias")])
    .select(defaults)
    .where(keys("email"))
    .where(isActiveUser)
    .unionAll(
      db
        .selectFrom("aliases")
        .select([
          "source as lookup_key",
          "smtp_quota_per_hour",
          "smtp_quota_per_day",
          sql.lit(1).as("from_alias"),
        ])
        .select(defaults)
        .where(keys("source"))
        .where("deleted", "=", activeFlag),
    );
});

const tokenByHash: KeyedRead<ApiTokenRow & { lookup_key: string }> = (db, keys) =>
  db.selectFrom("api_tokens").selectAll().select("token_hash as lookup_key").where(keys("token_hash"));

/**
 * The integration API's fast path: the questions Dovecot and Postfix ask for every message and
 * login, and the API token check, answered from the database (every instance sees every write) by
 * the keyed reads of db/key-reads.ts. On SQLite the answer is there at once and is passed on as a
 * value, not a promise (see eventually.ts), from the token check to the written response; on
 * PostgreSQL and MariaDB the reads of one event-loop turn go to the server as one statement.
 *
 * Addresses arrive parsed (a 400 at the edge), so they are not parsed twice per message. userdb
 * and smtpQuota answer "no such user" with null, not a thrown error: a third of the keys mail
 * servers ask about are unknown or deleted, and a throw costs more than the read.
 */
export class MessageLookups {
  readonly #settings: SettingsService;
  readonly #tokens: TokenService;
  readonly #domain: KeyReader<{ lookup_key: string }>;
  readonly #activeUser: KeyReader<{ lookup_key: string }>;
  readonly #userdb;
  readonly #alias: KeyReader<{ lookup_key: string; destinations: string }>;
  readonly #senderSources;
  readonly #smtpQuota;
  readonly #token: KeyReader<ApiTokenRow & { lookup_key: string }>;

  constructor(database: DatabaseHandle, settings: SettingsService, tokens: TokenService) {
    this.#settings = settings;
    this.#tokens = tokens;
    this.#domain = database.keyReader(domainByName);
    this.#activeUser = database.keyReader(activeUserByEmail);
    this.#userdb = database.keyReader(userdbByEmail);
    this.#alias = database.keyReader(aliasBySource);
    this.#senderSources = database.keyReader(senderSourcesByAddress);
    this.#smtpQuota = database.keyReader(smtpQuotaByAddress);
    // Most requests of a turn present the same few tokens: one read per token and turn (SQLite).
    this.#token = database.keyReader(tokenByHash, { sameInTurn: true });
  }

  /** The token a presented value stands for, or null (the rules are TokenService's). */
  authenticate(plain: string): Eventually<ApiToken | null> {
    const tokenHash = this.#tokens.hashOf(plain);
    if (tokenHash === null) return null;
    return andThen(this.#token(tokenHash), ([row]) => {
      if (!row) return null;
      const recording = this.#tokens.recordUseIfDue(row);
      return recording === null ? this.#tokens.tokenOf(row) : recording.then(() => this.#tokens.tokenOf(row));
    });
  }

  /** Dovecot's userdb: an active user's MailCrypt state and quota (one query, with the setting). */
  userdb(address: Address): Eventually<UserdbEntry | null> {
    return andThen(this.#userdb(address.email), ([row]) => {
      if (!row) return null;
      const level = decodeSetting("mail_crypt", row.mail_crypt_level);
      return {
        user: row.lookup_key,
        mailCrypt: reportsMailCrypt(level, flag(row.mail_crypt), row.mail_crypt_public_key) ? 2 : 0,
        mailCryptPublicKey: row.mail_crypt_public_key ?? "",
        quota: row.quota === null ? "" : `${row.quota}M`,
      };
    });
  }

  /** Takes a parsed domain name (lower case). */
  isManagedDomain(domain: string): Eventually<boolean> {
    return andThen(this.#domain(domain), (rows) => rows.length > 0);
  }

  hasMailbox(address: Address): Eventually<boolean> {
    return andThen(this.#activeUser(address.email), (rows) => rows.length > 0);
  }

  /** Destinations of an alias; postmaster@ and abuse@ of managed domains go where the settings say. */
  aliasDestinations(address: Address): Eventually<string[]> {
    if (address.localPart === "postmaster" || address.localPart === "abuse")
      return this.#roleDestinations(address.localPart, address);
    return andThen(this.#alias(address.email), ([row]) => (row ? parseStringList(row.destinations) : []));
  }

  async #roleDestinations(role: "postmaster" | "abuse", address: Address): Promise<string[]> {
    const setting = await this.#settings.get(role === "postmaster" ? "postmaster_address" : "abuse_address");
    if (setting !== "" && (await this.isManagedDomain(address.domain))) return [setting];
    const [row] = await this.#alias(address.email);
    return row ? parseStringList(row.destinations) : [];
  }

  /** Logins allowed to send as an address: the mailbox itself, then the alias destinations. */
  senders(address: Address): Eventually<string[]> {
    return andThen(this.#senderSources(address.email), (rows) => {
      const senders = rows.some((row) => Number(row.from_alias) === 0) ? [address.email] : [];
      const alias = rows.find((row) => Number(row.from_alias) === 1);
      for (const destination of alias ? parseStringList(alias.destinations) : [])
        if (!senders.includes(destination)) senders.push(destination);
      return senders;
    });
  }

  smtpQuota(address: Address): Eventually<SmtpQuotaAnswer | null> {
    return andThen(this.#smtpQuota(address.email), (rows) => {
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
}
