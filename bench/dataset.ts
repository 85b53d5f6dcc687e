import { mailCryptMaterial } from "../packages/service/src/accounts/mail-crypt-policy.ts";
import { InstallationSecret } from "../packages/service/src/config.ts";
import {
  appPasswordLookupHash,
  generateAppPassword,
  normalizeAppPassword,
  sealWithAppPassword,
} from "../packages/service/src/credentials/app-passwords.ts";
import { CryptoPool } from "../packages/service/src/credentials/crypto-pool.ts";
import { openSecretBox } from "../packages/service/src/credentials/mailcrypt.ts";
import { secretBoxBinding } from "../packages/service/src/credentials/password-check.ts";
import { hashPassword } from "../packages/service/src/credentials/passwords.ts";
import type { DatabaseHandle } from "../packages/service/src/db/database.ts";
import { migrateToLatest } from "../packages/service/src/db/migrate.ts";
import { createServices } from "../packages/service/src/services.ts";

/** Size of a generated data set; the full benchmark uses `fullSize`. */
export interface DatasetSize {
  domains: number;
  users: number;
  aliases: number;
}

export const fullSize: DatasetSize = { domains: 1000, users: 100_000, aliases: 100_000 };
export const smokeSize: DatasetSize = { domains: 10, users: 1000, aliases: 1000 };

/** The one password every generated user has (so passdb really verifies and unlocks). */
export const benchPassword = "bench-password-correct-horse";

/**
 * The real credential material, made once with the service's own functions: one Argon2id hash and
 * one key pair sealed in a secret box under `benchPassword`. Every generated user reuses them.
 */
export interface Credentials {
  passwordHash: string;
  publicKey: string;
  secretBox: string;
  /** The box bound to the hash: the users are in the current form (one derivation per sign-in). */
  secretBoxBinding: string;
}

export async function makeCredentials(): Promise<Credentials> {
  const pool = new CryptoPool(2);
  const [passwordHash, material] = await Promise.all([
    hashPassword(benchPassword, pool),
    mailCryptMaterial("new-keys-without-recovery", benchPassword, pool),
  ]);
  return {
    passwordHash,
    publicKey: material.publicKey,
    secretBox: material.secretBox,
    secretBoxBinding: secretBoxBinding(passwordHash, material.secretBox),
  };
}

// Which generated index is what: disjoint classes, fixed shares of the population.
export const domainName = (d: number) => `domain${d}.example`;
export const userEmail = (i: number, size: DatasetSize) => `user${i}@${domainName(i % size.domains)}`;
export const aliasSource = (i: number, size: DatasetSize) =>
  `alias${i}@${domainName((i * 7) % size.domains)}`;
/** 2% of users and aliases are deleted. */
export const isDeleted = (i: number) => i % 50 === 1;
/** 1% of users carry ROLE_SPAM. */
export const isSpam = (i: number) => i % 100 === 3;
/** 10% of users have MailCrypt keys (never deleted, never spam, by construction). */
export const hasMailCrypt = (i: number) => i % 10 === 5;
/** 10% of users and aliases have their own SMTP quota; the rest use the settings' defaults. */
const hasOwnSmtpQuota = (i: number) => i % 10 === 7;

/** A small deterministic PRNG so runs generate the same data and key lists. */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface GeneratedDataset {
  size: DatasetSize;
  seconds: number;
  counts: {
    domains: number;
    users: number;
    aliases: number;
    mailCryptUsers: number;
    deletedUsers: number;
    spamUsers: number;
    deletedAliases: number;
  };
  /** Plain API tokens, made through the service's TokenService. */
  tokens: { mta: string; mailboxServer: string; both: string };
}

/**
 * Fills a fresh database (schema migrated here) with domains, users and aliases in batched
 * inserts inside one transaction per table, then creates the API tokens through TokenService.
 */
export async function generateDataset(
  handle: DatabaseHandle,
  size: DatasetSize,
  credentials: Credentials,
): Promise<GeneratedDataset> {
  const started = performance.now();
  await migrateToLatest(handle);
  const { db } = handle;
  const now = Math.floor(Date.now() / 1000);
  // MariaDB and PostgreSQL allow 65,535 bound parameters per statement, SQLite 32,766: users have
  // 22 columns, so 1,000 rows stay under every limit.
  const batch = 1000;
  const random = prng(42);

  await db.transaction().execute(async (trx) => {
    for (let start = 0; start < size.domains; start += batch) {
      const rows = [];
      for (let d = start; d < Math.min(size.domains, start + batch); d++)
        rows.push({ name: domainName(d), created_at: now, updated_at: now });
      await trx.insertInto("domains").values(rows).execute();
    }
  });
  const domainIds = new Map<string, number>();
  for (const row of await db.selectFrom("domains").select(["id", "name"]).execute())
    domainIds.set(row.name, row.id);
  const domainId = (email: string) => domainIds.get(email.slice(email.indexOf("@") + 1)) ?? 0;

  const counts = {
    domains: size.domains,
    users: size.users,
    aliases: size.aliases,
    mailCryptUsers: 0,
    deletedUsers: 0,
    spamUsers: 0,
    deletedAliases: 0,
  };
  await db.transaction().execute(async (trx) => {
    for (let start = 0; start < size.users; start += batch) {
      const rows = [];
      for (let i = start; i < Math.min(size.users, start + batch); i++) {
        const email = userEmail(i, size);
        const keys = hasMailCrypt(i);
        const ownQuota = hasOwnSmtpQuota(i);
        if (keys) counts.mailCryptUsers++;
        if (isDeleted(i)) counts.deletedUsers++;
        if (isSpam(i)) counts.spamUsers++;
        rows.push({
          email,
          domain_id: domainId(email),
          password: credentials.passwordHash,
          roles: JSON.stringify(isSpam(i) ? ["ROLE_USER", "ROLE_SPAM"] : ["ROLE_USER"]),
          password_change_required: 0 as const,
          quota: i % 4 === 0 ? 1024 : null,
          smtp_quota_per_hour: ownQuota ? 100 : null,
          smtp_quota_per_day: ownQuota ? 1000 : null,
          mail_crypt: keys ? (1 as const) : (0 as const),
          mail_crypt_public_key: keys ? credentials.publicKey : null,
          mail_crypt_secret_box: keys ? credentials.secretBox : null,
          secret_box_binding: keys ? credentials.secretBoxBinding : null,
          recovery_secret_box: null,
          recovery_start_time: null,
          totp_secret: null,
          totp_confirmed: 0 as const,
          totp_backup_codes: "[]",
          totp_last_step: null,
          // Recent activity, so the inactivity job of the running service leaves everyone alone.
          last_login_time: now - Math.floor(random() * 30) * 86400,
          created_at: now - 86400 * 400,
          updated_at: now,
          deleted: isDeleted(i) ? (1 as const) : (0 as const),
        });
      }
      await trx.insertInto("users").values(rows).execute();
    }
  });

  const firstUserId = Number(
    (
      await db
        .selectFrom("users")
        .select("id")
        .where("email", "=", userEmail(0, size))
        .executeTakeFirstOrThrow()
    ).id,
  );
  await db.transaction().execute(async (trx) => {
    for (let start = 0; start < size.aliases; start += batch) {
      const rows = [];
      for (let i = start; i < Math.min(size.aliases, start + batch); i++) {
        const source = aliasSource(i, size);
        const destinations: string[] = [];
        const wanted = 1 + Math.floor(random() * 3);
        while (destinations.length < wanted) {
          const target = userEmail(Math.floor(random() * size.users), size);
          if (!destinations.includes(target)) destinations.push(target);
        }
        const owner = i % 3 === 0 ? Math.floor(random() * size.users) : null;
        if (isDeleted(i)) counts.deletedAliases++;
        rows.push({
          source,
          domain_id: domainId(source),
          destinations: JSON.stringify(destinations),
          // Users are inserted in index order into an empty table: ids are consecutive.
          user_id: owner === null ? null : firstUserId + owner,
          smtp_quota_per_hour: hasOwnSmtpQuota(i) ? 50 : null,
          smtp_quota_per_day: hasOwnSmtpQuota(i) ? 500 : null,
          created_at: now - 86400 * 100,
          updated_at: now,
          deleted: isDeleted(i) ? (1 as const) : (0 as const),
        });
      }
      await trx.insertInto("aliases").values(rows).execute();
    }
  });

  const services = createServices(handle, new CryptoPool(1), {
    installationSecret: InstallationSecret.generate(),
  });
  const mta = await services.tokens.create("bench-mta", ["mta"]);
  const mailboxServer = await services.tokens.create("bench-dovecot", ["mailbox-server"]);
  const both = await services.tokens.create("bench-both", ["mta", "mailbox-server"]);
  return {
    size,
    seconds: (performance.now() - started) / 1000,
    counts,
    tokens: { mta: mta.plainToken, mailboxServer: mailboxServer.plainToken, both: both.plainToken },
  };
}

/** One request of a key list: a path, and a body for POSTs. */
export interface KeyedRequest {
  path: string;
  body?: string;
  /** What the key stands for, for the statistics. */
  kind: "existing" | "unknown" | "deleted";
  /** A sign-in's X-Client-Address, as Dovecot's adapter sends the IMAP client's address. */
  clientAddress?: string;
}

export type LookupEndpoint = "domain" | "mailbox" | "alias" | "senders" | "smtp_quota" | "userdb";
export const lookupEndpoints: LookupEndpoint[] = [
  "domain",
  "mailbox",
  "alias",
  "senders",
  "smtp_quota",
  "userdb",
];

export const endpointPath: Record<LookupEndpoint, string> = {
  domain: "/api/mta/domain/",
  mailbox: "/api/mta/mailbox/",
  alias: "/api/mta/alias/",
  senders: "/api/mta/senders/",
  smtp_quota: "/api/mta/smtp_quota/",
  userdb: "/api/mailbox-server/",
};

export const endpointScope = (endpoint: LookupEndpoint): "mta" | "mailboxServer" =>
  endpoint === "userdb" ? "mailboxServer" : "mta";

/**
 * A shuffled list of keys for one endpoint: 70% existing, 10% deleted, 20% unknown addresses (for
 * domains: 80% managed, 20% unknown). Existing keys are users, or aliases for alias lookups; senders
 * and smtp_quota mix both.
 */
export function keyList(endpoint: LookupEndpoint, size: DatasetSize, count: number, seed: number) {
  const random = prng(seed);
  const pick = (n: number) => Math.floor(random() * n);
  const activeUser = () => {
    for (;;) {
      const i = pick(size.users);
      if (!isDeleted(i)) return userEmail(i, size);
    }
  };
  const deletedUser = () => userEmail(pick(Math.floor(size.users / 50)) * 50 + 1, size);
  const activeAlias = () => {
    for (;;) {
      const i = pick(size.aliases);
      if (!isDeleted(i)) return aliasSource(i, size);
    }
  };
  const deletedAlias = () => aliasSource(pick(Math.floor(size.aliases / 50)) * 50 + 1, size);
  const unknown = () => `nobody${pick(1_000_000)}@${domainName(pick(size.domains))}`;
  const list: KeyedRequest[] = [];
  for (let n = 0; n < count; n++) {
    const r = random();
    let key: string;
    let kind: KeyedRequest["kind"];
    if (endpoint === "domain") {
      if (r < 0.8) [key, kind] = [domainName(pick(size.domains)), "existing"];
      else [key, kind] = [`unknown${pick(1_000_000)}.example`, "unknown"];
    } else if (r < 0.7) {
      const alias =
        endpoint === "alias" || ((endpoint === "senders" || endpoint === "smtp_quota") && random() < 0.5);
      [key, kind] = [alias ? activeAlias() : activeUser(), "existing"];
    } else if (r < 0.8) {
      [key, kind] = [endpoint === "alias" ? deletedAlias() : deletedUser(), "deleted"];
    } else {
      [key, kind] = [unknown(), "unknown"];
    }
    list.push({ path: endpointPath[endpoint] + encodeURIComponent(key).replace(/%40/g, "@"), kind });
  }
  return list;
}

/** Each user signs in from an address of their own (10.0.0.0/8), always the same one. */
const userClientAddress = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

/** passdb requests for active MailCrypt users, with the right password: the full sign-in path. */
export function passdbList(
  size: DatasetSize,
  count: number,
  seed: number,
  withClientAddresses = false,
): KeyedRequest[] {
  const random = prng(seed);
  const list: KeyedRequest[] = [];
  const candidates = Math.floor(size.users / 10);
  for (let n = 0; n < count; n++) {
    const i = Math.floor(random() * candidates) * 10 + 5;
    list.push({
      path: endpointPath.userdb + userEmail(i, size),
      body: JSON.stringify({ password: benchPassword }),
      kind: "existing",
      ...(withClientAddresses ? { clientAddress: userClientAddress(i) } : {}),
    });
  }
  return list;
}

/** A MailCrypt user's mail app password (scope mail), as the bench's passdb load gives it. */
export interface AppPasswordCredential {
  /** The user's index in the data set. */
  index: number;
  email: string;
  password: string;
  /** Made through AppPasswordService.createForOwner (else by the bulk path, see below). */
  throughServices: boolean;
}

/**
 * One mail app password for each of the first `count` MailCrypt users (indexes 5, 15, 25, ...: never
 * deleted, never spam). The first `throughServices` are made as their owner makes them: the
 * password re-confirmed, then AppPasswordService.createForOwner (two Argon2id runs each, so only a
 * few). The rest the way the data set makes its users: the private key opened once, then per user
 * the service's own credential functions (a new app password, its keyed-hash lookup key, its HKDF
 * secret box of the key) and batched inserts, in one transaction.
 *
 * `secret` must be the running service's installation secret: app passwords are found by a hash
 * keyed with it.
 */
export async function generateAppPasswords(
  handle: DatabaseHandle,
  size: DatasetSize,
  credentials: Credentials,
  secret: InstallationSecret,
  count: number,
  throughServices: number,
): Promise<{ seconds: number; credentials: AppPasswordCredential[] }> {
  const started = performance.now();
  const { db } = handle;
  const pool = new CryptoPool(2);
  const services = createServices(handle, pool, { installationSecret: secret });
  const origin = { door: "console" as const, clientAddress: null, actor: "bench" };
  const indexes = Array.from({ length: Math.min(count, size.users / 10) }, (_, k) => k * 10 + 5);
  const emails = indexes.map((i) => userEmail(i, size));
  const made: AppPasswordCredential[] = [];
  await Promise.all(
    emails.slice(0, throughServices).map(async (email) => {
      const user = await services.users.findByEmail(email);
      if (!user?.mailCryptSecretBox) throw new Error(`${email}: not a MailCrypt user of the data set`);
      const proof = await services.signIn.confirmPassword(user, benchPassword);
      const created = await services.appPasswords.createForOwner(
        proof,
        { name: "Phone", scope: "mail" },
        origin,
      );
      made.push({
        index: indexes[emails.indexOf(email)]!,
        email,
        password: created.password,
        throughServices: true,
      });
    }),
  );
  const privateKey = await openSecretBox(credentials.secretBox, benchPassword, pool);
  const bulk = emails.slice(throughServices);
  const ids = new Map<string, number>();
  for (let start = 0; start < bulk.length; start += 500)
    for (const row of await db
      .selectFrom("users")
      .select(["id", "email"])
      .where("email", "in", bulk.slice(start, start + 500))
      .execute())
      ids.set(row.email, Number(row.id));
  const now = Math.floor(Date.now() / 1000);
  await db.transaction().execute(async (trx) => {
    for (let start = 0; start < bulk.length; start += 1000) {
      const rows = bulk.slice(start, start + 1000).map((email, n) => {
        const password = generateAppPassword();
        const normalized = normalizeAppPassword(password) as string;
        made.push({ index: indexes[throughServices + start + n]!, email, password, throughServices: false });
        return {
          user_id: ids.get(email) ?? 0,
          name: "Phone",
          scope: "mail" as const,
          lookup_hash: appPasswordLookupHash(normalized, secret),
          secret_box: sealWithAppPassword(privateKey, normalized, secret),
          created_at: now,
          last_used_at: null,
          last_used_address: null,
        };
      });
      await trx.insertInto("app_passwords").values(rows).execute();
    }
  });
  return { seconds: (performance.now() - started) / 1000, credentials: made };
}

/**
 * passdb requests with mail app passwords, shuffled: the app-password sign-in path. With client
 * addresses (as Dovecot's adapter always sends them), each user from the address of their own.
 */
export function appPasswordPassdbList(
  made: AppPasswordCredential[],
  count: number,
  seed: number,
  withClientAddresses: boolean,
) {
  const random = prng(seed);
  const shuffled = [...made];
  for (let i = shuffled.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!];
  }
  const list: KeyedRequest[] = [];
  for (let n = 0; n < count; n++) {
    // Every app password once, then at random.
    const { index, email, password } =
      shuffled[n < shuffled.length ? n : Math.floor(random() * shuffled.length)]!;
    list.push({
      path: endpointPath.userdb + email,
      body: JSON.stringify({ password }),
      kind: "existing",
      ...(withClientAddresses ? { clientAddress: userClientAddress(index) } : {}),
    });
  }
  return list;
}
