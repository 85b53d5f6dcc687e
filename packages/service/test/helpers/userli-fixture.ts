import { createPrivateKey, createPublicKey, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import * as openpgp from "openpgp";
import { CryptoPool } from "../../src/credentials/crypto-pool.ts";
import { openSecretBox, sealSecretBox } from "../../src/credentials/mailcrypt.ts";
import { generateTotpSecret } from "../../src/credentials/totp.ts";
import { wkdHash } from "../../src/openpgp/wkd.ts";
import { hashToken } from "../../src/tokens/tokens.ts";
import type { UserliDatabase, UserliRow } from "./userli-database.ts";
import { userliTime } from "./userli-database.ts";

/**
 * The content of the importer's userli database: users made with the known-answer vectors
 * (userli's own password hashes of every scheme, its secret box and key pair), generated users and
 * aliases, and a few rows this service must refuse, each with the reason the report should give.
 */

const vectors = JSON.parse(readFileSync(new URL("../credentials/vectors.json", import.meta.url), "utf8")) as {
  passwordHashes: Record<
    | "password"
    | "argon2id"
    | "sha512crypt_rounds"
    | "sha512crypt"
    | "sha256crypt_rounds"
    | "md5crypt"
    | "bcrypt_2y",
    string
  >;
  secretBox: { secret: string; box: string };
  mailCryptKeyPair: { publicKey: string; privateKey: string };
};

export const vectorPassword = vectors.passwordHashes.password;
const hashes = vectors.passwordHashes;

/** base64 of the SPKI PEM of a base64 PKCS#8 PEM private key: the public half as userli stores it. */
export function publicKeyOf(privateKeyB64: string): string {
  const pem = createPublicKey(createPrivateKey(Buffer.from(privateKeyB64, "base64").toString("utf8"))).export(
    {
      type: "spki",
      format: "pem",
    },
  );
  return Buffer.from(String(pem), "utf8").toString("base64");
}

/** What the tests need to know about the userli database they import. */
export interface UserliFixture {
  password: string;
  alice: {
    privateKey: string;
    publicKey: string;
    recoveryToken: string;
    totpSecret: string;
    backupCodes: string[];
  };
  bob: { privateKey: string; publicKey: string };
  legacy: Record<string, string>;
  tokens: { dovecot: string; postfix: string; keycloak: string };
  key: { email: string; data: string; fingerprint: string; keyId: string; wkdHash: string };
  generated: number;
  /** [table, id] of every row the import must refuse, and of those it imports with a change. */
  refused: [string, string][];
  adjusted: [string, string][];
}

interface Material {
  aliceBox: string;
  bobBox: string;
  alicePrivate: string;
  key: UserliFixture["key"];
}

let material: Promise<Material> | undefined;

/** The expensive parts (two secret boxes, an OpenPGP key), made once per test process. */
function makeMaterial(): Promise<Material> {
  material ??= (async () => {
    const pool = new CryptoPool(2);
    // The vectors' recovery box holds a private key: alice's, sealed again under her password.
    const alicePrivate = await openSecretBox(vectors.secretBox.box, vectors.secretBox.secret, pool);
    const [aliceBox, bobBox] = await Promise.all([
      sealSecretBox(alicePrivate, vectorPassword, pool),
      sealSecretBox(vectors.mailCryptKeyPair.privateKey, vectorPassword, pool),
    ]);
    const generated = await openpgp.generateKey({
      type: "ecc",
      curve: "curve25519Legacy",
      userIDs: [{ name: "Alice", email: "alice@example.org" }],
      format: "object",
    });
    const key = generated.publicKey;
    const hex = key.getFingerprint().toUpperCase();
    const groups = hex.match(/.{4}/g) ?? [];
    return {
      aliceBox,
      bobBox,
      alicePrivate,
      key: {
        email: "alice@example.org",
        data: Buffer.from(key.write()).toString("base64"),
        fingerprint: `${groups.slice(0, 5).join(" ")}  ${groups.slice(5).join(" ")}`,
        keyId: key.getKeyID().toHex().toUpperCase(),
        wkdHash: wkdHash("alice"),
      },
    };
  })();
  return material;
}

const t = (iso: string) => userliTime(Date.parse(`${iso}Z`) / 1000);

/** Fills an empty userli database; `generated` extra users (each with an alias) after the named ones. */
export async function fillUserli(db: UserliDatabase, generated = 20): Promise<UserliFixture> {
  const m = await makeMaterial();
  const totpSecret = generateTotpSecret();
  const backupCodes = ["123456", "234567", "345678", "456789", "567890", "678901"];
  const tokens = {
    dovecot: randomBytes(32).toString("hex"),
    postfix: randomBytes(32).toString("hex"),
    keycloak: randomBytes(32).toString("hex"),
  };
  const created = t("2024-01-02T03:04:05");
  const updated = t("2026-11-20T10:00:00");
  const times = { creation_time: created, updated_time: updated };

  await db.insert("domains", [
    {
      id: 1,
      name: "example.org",
      invitation_enabled: true,
      invitation_limit: 3,
      invitation_waiting_period_days: 7,
      ...times,
    },
    {
      id: 2,
      name: "example.net",
      invitation_enabled: false,
      invitation_limit: 0,
      invitation_waiting_period_days: 7,
      ...times,
    },
    {
      id: 3,
      name: "Example.COM",
      invitation_enabled: false,
      invitation_limit: 0,
      invitation_waiting_period_days: 14,
      ...times,
    },
    {
      id: 4,
      name: "not a domain",
      invitation_enabled: false,
      invitation_limit: 0,
      invitation_waiting_period_days: 7,
      ...times,
    },
  ]);

  const user = (
    id: number,
    email: string,
    domain: number,
    password: string,
    extra: UserliRow = {},
  ): UserliRow => ({
    id,
    domain_id: domain,
    email,
    password,
    password_version: password.startsWith("$argon2") ? 2 : 1,
    roles: '["ROLE_USER"]',
    totp_backup_codes: "[]",
    ...times,
    ...extra,
  });
  const users: UserliRow[] = [
    user(1, "alice@example.org", 1, hashes.argon2id, {
      mail_crypt: true,
      mail_crypt_public_key: publicKeyOf(m.alicePrivate),
      mail_crypt_secret_box: m.aliceBox,
      recovery_secret_box: vectors.secretBox.box,
      totp_secret: totpSecret,
      totp_confirmed: true,
      totp_backup_codes: JSON.stringify(backupCodes),
      quota: 1024,
      smtp_quota_limits: '{"per_hour":10,"per_day":100}',
      last_login_time: t("2026-11-23T00:00:00"),
    }),
    user(2, "bob@example.org", 1, hashes.sha512crypt_rounds, {
      roles: '["ROLE_USER","ROLE_PERMANENT"]',
      mail_crypt: true,
      mail_crypt_public_key: vectors.mailCryptKeyPair.publicKey,
      mail_crypt_secret_box: m.bobBox,
      recovery_start_time: t("2026-11-01T12:00:00"),
    }),
    user(3, "carol@example.org", 1, hashes.sha512crypt, { roles: '["ROLE_DOMAIN_ADMIN"]' }),
    user(4, "dave@example.net", 2, hashes.sha256crypt_rounds),
    user(5, "erin@example.net", 2, hashes.md5crypt, {
      totp_secret: generateTotpSecret(),
      totp_confirmed: false,
      totp_backup_codes: '["111111"]',
    }),
    user(6, "frank@example.net", 2, hashes.bcrypt_2y, { roles: '["ROLE_ADMIN"]', quota: 0 }),
    user(7, "gone@example.org", 1, hashes.argon2id, { roles: "[]", deleted: true }),
    user(8, "spam@example.org", 1, hashes.argon2id, { roles: '["ROLE_USER","ROLE_SPAM"]' }),
    user(9, "Mixed.Case@Example.COM", 3, hashes.argon2id, { password_change_required: true }),
    user(10, "bad address@example.org", 1, hashes.argon2id),
    user(11, "plain@example.org", 1, "{PLAIN}secret"),
    user(12, "king@example.org", 1, hashes.argon2id, { roles: '["ROLE_USER","ROLE_KING"]' }),
    user(13, "orphan@unknown.example", 1, hashes.argon2id),
    user(14, "olddeleted@example.org", 1, "*", { deleted: true }),
  ];
  for (let n = 0; n < generated; n++)
    users.push(
      user(100 + n, `gen${n}@example.net`, 2, hashes.argon2id, {
        quota: n % 2 === 0 ? 512 : null,
        last_login_time: t("2026-10-05T00:00:00"),
      }),
    );
  await db.insert("users", users);

  await db.insert("vouchers", [
    {
      id: 1,
      user_id: 1,
      domain_id: 1,
      code: "abc123",
      redeemed_time: t("2025-05-05T05:05:05"),
      creation_time: created,
    },
    { id: 2, user_id: 1, domain_id: 1, code: "xyz789", redeemed_time: null, creation_time: created },
    { id: 3, user_id: 11, domain_id: 1, code: "gh0st1", redeemed_time: null, creation_time: created },
  ]);
  await db.execute("UPDATE users SET invitation_voucher_id = ? WHERE id = ?", [1, 4]);

  const alias = (id: number, source: string, extra: UserliRow = {}): UserliRow => ({
    id,
    source,
    domain_id: source.endsWith("@example.net") ? 2 : 1,
    ...times,
    ...extra,
  });
  const aliases: UserliRow[] = [
    alias(1, "team@example.org", { destination: "alice@example.org", user_id: 1 }),
    alias(2, "team@example.org", {
      destination: "bob@example.org",
      user_id: 1,
      updated_time: t("2026-11-21T00:00:00"),
    }),
    alias(3, "k3j4h5g6f7d8s9a0q1w2e3r4@example.org", {
      destination: "alice@example.org",
      user_id: 1,
      random: true,
      note: "shopping",
    }),
    alias(4, "old@example.org", { deleted: true }),
    alias(5, "fwd@example.net", {
      destination: "someone@elsewhere.test",
      smtp_quota_limits: '{"per_hour":5,"per_day":null}',
    }),
    alias(6, "broken@example.net", { destination: "not an address" }),
    alias(7, "ghost@example.org", { destination: "plain@example.org", user_id: 11 }),
    alias(9, "nodest@example.org"),
    alias(10, "carol-alias@example.net", { destination: "carol@example.org", user_id: 3 }),
    alias(11, "alice@example.org", { destination: "bob@example.org" }),
  ];
  for (let n = 0; n < generated; n++)
    aliases.push(
      alias(100 + n, `galias${n}@example.net`, { destination: `gen${n}@example.net`, user_id: 100 + n }),
    );
  await db.insert("aliases", aliases);

  await db.insert("reserved_names", [
    { id: 1, name: "abuse", ...times },
    { id: 2, name: "postmaster", ...times },
    { id: 3, name: "admin", ...times },
    { id: 4, name: "Webmaster", ...times },
  ]);
  await db.insert("openpgp_keys", [
    {
      id: 1,
      uploader_id: 1,
      domain_id: 1,
      email: m.key.email,
      key_id: m.key.keyId,
      key_fingerprint: m.key.fingerprint,
      key_expire_time: null,
      key_data: m.key.data,
      wkd_hash: m.key.wkdHash,
    },
    {
      id: 2,
      uploader_id: null,
      domain_id: 1,
      email: "old@example.org",
      key_id: m.key.keyId,
      key_fingerprint: m.key.fingerprint,
      key_expire_time: null,
      key_data: m.key.data,
      wkd_hash: wkdHash("old"),
    },
  ]);
  await db.insert("api_tokens", [
    {
      id: 1,
      name: "dovecot",
      scopes: '["dovecot"]',
      token: hashToken(tokens.dovecot),
      creation_time: created,
    },
    {
      id: 2,
      name: "postfix",
      scopes: '["postfix"]',
      token: hashToken(tokens.postfix),
      creation_time: created,
    },
    {
      id: 3,
      name: "keycloak and retention",
      scopes: '["keycloak","retention"]',
      token: hashToken(tokens.keycloak),
      creation_time: created,
      last_used_time: t("2026-11-24T08:00:00"),
    },
    { id: 4, name: "root", scopes: '["superuser"]', token: hashToken("x"), creation_time: created },
  ]);
  await db.insert("settings", [
    { id: 1, name: "app_name", value: "Example Mail", ...times },
    { id: 2, name: "mail_crypt", value: "2", ...times },
    { id: 3, name: "weekly_report_enabled", value: "0", ...times },
    { id: 4, name: "postmaster_address", value: "", ...times },
    { id: 5, name: "project_url", value: null, ...times },
    { id: 6, name: "legacy_thing", value: "x", ...times },
  ]);
  await db.insert("webhook_endpoints", [
    {
      id: 1,
      url: "https://hooks.example.test/userli",
      secret: "a-secret-of-at-least-16",
      events: '["user.created","user.deleted"]',
      enabled: true,
      ...times,
    },
    {
      id: 2,
      url: "https://hooks.example.test/all",
      secret: "another-secret-1234",
      events: null,
      enabled: false,
      ...times,
    },
  ]);
  await db.insert("webhook_endpoint_domain", [{ webhook_endpoint_id: 1, domain_id: 1 }]);
  await db.insert("webhook_deliveries", [
    {
      id: db.kind === "postgres" ? "0190f5a8-0000-7000-8000-000000000001" : "0123456789abcdef",
      endpoint_id: 1,
      type: "user.deleted",
      request_body: '{"type":"user.deleted"}',
      request_headers: "{}",
      success: true,
      attempts: 1,
      dispatched_time: updated,
    },
  ]);
  await db.insert("user_notifications", [
    { id: 1, user_id: 1, type: "password_compromised", creation_time: created },
  ]);

  return {
    password: vectorPassword,
    alice: {
      privateKey: m.alicePrivate,
      publicKey: publicKeyOf(m.alicePrivate),
      recoveryToken: vectors.secretBox.secret,
      totpSecret,
      backupCodes,
    },
    bob: { privateKey: vectors.mailCryptKeyPair.privateKey, publicKey: vectors.mailCryptKeyPair.publicKey },
    legacy: {
      "bob@example.org": "sha512-crypt",
      "carol@example.org": "sha512-crypt",
      "dave@example.net": "sha256-crypt",
      "erin@example.net": "md5-crypt",
      "frank@example.net": "bcrypt",
    },
    tokens,
    key: m.key,
    generated,
    refused: [
      ["domains", "4"],
      ["users", "10"],
      ["users", "11"],
      ["users", "12"],
      ["users", "13"],
      ["aliases", "6"],
      ["aliases", "7"],
      ["aliases", "11"],
      ["vouchers", "3"],
      ["openpgp_keys", "2"],
      ["api_tokens", "4"],
      ["settings", "6"],
    ],
    adjusted: [
      ["users", "14"],
      ["aliases", "9"],
    ],
  };
}
