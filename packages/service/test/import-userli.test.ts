import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHmac } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Kysely } from "kysely";
import { CryptoPool } from "../src/credentials/crypto-pool.ts";
import { openSecretBox } from "../src/credentials/mailcrypt.ts";
import { type DatabaseHandle, openDatabase } from "../src/db/database.ts";
import type { Database } from "../src/db/schema.ts";
import { createServices } from "../src/services.ts";
import { hashToken } from "../src/tokens/tokens.ts";
import { scratchDatabase } from "./helpers/databases.ts";
import { consolePath, type RunningService, runConsole, startServiceProcess } from "./helpers/process.ts";
import { installationSecret } from "./helpers/service.ts";
import {
  createUserliDatabase,
  type UserliDatabase,
  type UserliKind,
  userliServer,
  userliTime,
} from "./helpers/userli-database.ts";
import { fillUserli, publicKeyOf, type UserliFixture } from "./helpers/userli-fixture.ts";

/**
 * app:import:userli against a userli database built from the reference's schema, in SQLite and in
 * MariaDB (and in PostgreSQL when this run's database is PostgreSQL), filled with users made with
 * the known-answer vectors. Every promise of issue 22 section 1 is checked through the integration
 * API of a real service process running on the imported database.
 */

const generated = 20;

/** RFC 6238 (SHA-1, 6 digits, 30 s) written out here, independent of the service's own TOTP code. */
function totp(secret: string, now = Date.now()): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = "";
  for (const ch of secret.replace(/=+$/, "").toUpperCase())
    bits += alphabet.indexOf(ch).toString(2).padStart(5, "0");
  const key = Buffer.from((bits.match(/.{8}/g) ?? []).map((b) => Number.parseInt(b, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(now / 30000)));
  const mac = createHmac("sha1", key).update(counter).digest();
  const offset = mac[mac.length - 1]! & 0x0f;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, "0");
}

/** The report's table lines: table -> [read, added, updated, unchanged, refused]. */
function summary(stdout: string): Map<string, number[]> {
  const rows = new Map<string, number[]>();
  for (const line of stdout.split("\n")) {
    const match = /^(\w+)\s+(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$/.exec(line);
    if (match) rows.set(match[1]!, match.slice(3).map(Number));
  }
  return rows;
}

/** [table, id] of the rows listed under a heading of the report. */
function listed(stdout: string, heading: RegExp): [string, string][] {
  const lines = stdout.split("\n");
  const start = lines.findIndex((l) => heading.test(l));
  if (start < 0) return [];
  const rows: [string, string][] = [];
  for (const line of lines.slice(start + 1)) {
    const match = /^ {2}(\w+) id (\S+): /.exec(line);
    if (!match) break;
    rows.push([match[1]!, match[2]!]);
  }
  return rows.sort();
}

const importUserli = (target: string, source: string, ...args: string[]) =>
  runConsole(target, ["app:import:userli", "--from", source, ...args]);

/** The dump of a database without its header's time: what "the same data" means here. */
function dumpOf(url: string): string[] {
  const result = runConsole(url, ["app:export"]);
  assert.equal(result.status, 0, result.stderr);
  const [header, ...rows] = result.stdout.trimEnd().split("\n");
  const { exportedAt: _time, ...rest } = JSON.parse(header ?? "{}");
  return [JSON.stringify(rest), ...rows];
}

const sources: { kind: UserliKind; skip: string | false }[] = [
  { kind: "sqlite", skip: false },
  {
    kind: "mariadb",
    skip: userliServer("mariadb") ? false : "no MariaDB server for the userli database: set TEST_MARIADB_URL",
  },
  {
    kind: "postgres",
    // userli runs on MariaDB; its PostgreSQL schema is read once, in the PostgreSQL run.
    skip: /^postgres/.test(process.env.TEST_DATABASE_URL ?? "")
      ? false
      : "the PostgreSQL userli database is read in the PostgreSQL run only",
  },
];

for (const { kind, skip } of sources) {
  describe(`app:import:userli from a userli database in ${kind}`, { skip }, () => {
    let source: UserliDatabase;
    let fixture: UserliFixture;
    let target: { url: string; remove: () => Promise<void> };
    let handle: DatabaseHandle;
    let db: Kysely<Database>;
    let first: ReturnType<typeof runConsole>;

    before(async () => {
      source = await createUserliDatabase(kind);
      fixture = await fillUserli(source, generated);
      target = await scratchDatabase("mas-import-");
    });
    after(async () => {
      await handle?.close();
      await source?.remove();
      await target?.remove();
    });

    test("--dry-run reports what would be imported and refused, and writes nothing", () => {
      const run = importUserli(target.url, source.url, "--dry-run");
      assert.equal(run.status, 2, run.stderr);
      assert.match(run.stdout, /WOULD ADD/);
      assert.match(run.stdout, /Dry run: nothing was written\./);
      assert.deepEqual(listed(run.stdout, /^Refused rows/), [...fixture.refused].sort());
      const users = summary(run.stdout).get("users");
      assert.deepEqual(users, [14 + generated, 10 + generated, 0, 0, 4]);
      // The schema is made (every command does that); no row is.
      const after = runConsole(target.url, ["app:users:list", "--status", "all", "--json"]);
      assert.deepEqual(JSON.parse(after.stdout), []);
    });

    test("--strict stops at the first refused row, before its batch is written", () => {
      const run = importUserli(target.url, source.url, "--strict");
      assert.equal(run.status, 1, run.stderr);
      assert.match(run.stdout, /--strict: stopped at domains id 4/);
      assert.deepEqual(listed(run.stdout, /^Refused rows/), [["domains", "4"]]);
      assert.equal(runConsole(target.url, ["app:domains:list", "--json"]).stdout.trim(), "[]");
    });

    test("the import takes every row it can and names each refused one with its table, id and reason", async () => {
      first = importUserli(target.url, source.url, "--batch-size", "7");
      assert.equal(first.status, 2, first.stderr);
      assert.deepEqual(listed(first.stdout, /^Refused rows/), [...fixture.refused].sort());
      assert.deepEqual(listed(first.stdout, /^Rows imported with a change/), [...fixture.adjusted].sort());
      for (const reason of [
        "users id 11: password: a hash in an unknown format",
        "users id 12: roles: unknown role ROLE_KING",
        "users id 13: the address's domain unknown.example is not imported",
        "aliases id 7: its owner (users row 11) is refused",
        "aliases id 11: the address belongs to a user",
        "vouchers id 3: its owner (users row 11) is refused",
        "openpgp_keys id 2: no active user or alias of the import has this address",
        'api_tokens id 4: scopes: unknown scope "superuser"',
        "settings id 6: unknown setting legacy_thing",
      ])
        assert.ok(first.stdout.includes(`  ${reason}`), `${reason}\n${first.stdout}`);
      const tables = summary(first.stdout);
      assert.deepEqual(tables.get("users"), [14 + generated, 10 + generated, 0, 0, 4]);
      // team@ has two rows (one per destination), merged into one alias.
      assert.deepEqual(tables.get("aliases"), [10 + generated, 6 + generated, 0, 0, 3]);
      assert.match(
        first.stdout,
        /password hashes: \d+ argon2id, 2 sha512-crypt, 1 sha256-crypt, 1 md5-crypt, 1 bcrypt/,
      );
      assert.match(first.stdout, /webhook_deliveries: 1 rows not imported/);
      assert.match(first.stdout, /users: 7 active users without a last login: the day of their last update/);
      // Not a terminal: progress as lines on standard error.
      assert.match(first.stderr, /^import: users \d+\/\d+ rows \(\d+%\)$/m);
      assert.match(first.stderr, /^import: all tables \d+\/\d+ rows \(\d+%\)(, about .+ left)?$/m);

      handle = await openDatabase(target.url, { poolSize: 2 });
      db = handle.db;
    });

    test("each value lands where it belongs, in this service's form", async () => {
      const user = (email: string) =>
        db.selectFrom("users").selectAll().where("email", "=", email).executeTakeFirstOrThrow();
      const alice = await user("alice@example.org");
      assert.equal(
        alice.password,
        (await import("./credentials/vectors.json", { with: { type: "json" } })).default.passwordHashes
          .argon2id,
      );
      assert.deepEqual(JSON.parse(alice.roles), ["ROLE_USER"]);
      assert.equal(alice.quota, 1024);
      assert.deepEqual([alice.smtp_quota_per_hour, alice.smtp_quota_per_day], [10, 100]);
      assert.equal(alice.last_login_time, Date.UTC(2026, 10, 23) / 1000);
      assert.equal(alice.created_at, Date.UTC(2024, 0, 2, 3, 4, 5) / 1000);
      assert.equal(alice.totp_secret, fixture.alice.totpSecret);
      // userli keeps backup codes in plain text; here they are keyed hashes (the installation secret).
      const codes = JSON.parse(alice.totp_backup_codes) as string[];
      assert.equal(codes.length, 6);
      assert.ok(codes.every((c) => /^\$hmac-sha256\$[A-Za-z0-9+/]{43}=$/.test(c)));
      const bob = await user("bob@example.org");
      assert.deepEqual(JSON.parse(bob.roles), ["ROLE_USER", "ROLE_PERMANENT"]);
      assert.equal(bob.recovery_start_time, Date.UTC(2026, 10, 1, 12) / 1000);
      assert.ok(Boolean(Number((await user("gone@example.org")).deleted)));
      assert.equal(Number((await user("mixed.case@example.com")).password_change_required), 1);
      // A deleted user with a hash nobody can check keeps the address, with an unusable password.
      assert.match((await user("olddeleted@example.org")).password, /^!deleted!/);

      const domains = await db
        .selectFrom("domains")
        .select(["name", "invitation_enabled", "invitation_limit", "invitation_waiting_period_days"])
        .orderBy("id")
        .execute();
      assert.deepEqual(
        domains.map((d) => [
          d.name,
          Number(d.invitation_enabled),
          d.invitation_limit,
          d.invitation_waiting_period_days,
        ]),
        [
          ["example.org", 1, 3, 7],
          ["example.net", 0, 0, 7],
          ["example.com", 0, 0, 14],
        ],
      );
      const aliases = await db.selectFrom("aliases").selectAll().execute();
      const alias = (source: string) => aliases.find((a) => a.source === source)!;
      assert.deepEqual(JSON.parse(alias("team@example.org").destinations), [
        "alice@example.org",
        "bob@example.org",
      ]);
      assert.equal(alias("team@example.org").user_id, alice.id);
      assert.equal(alias("team@example.org").updated_at, Date.UTC(2026, 10, 21) / 1000);
      const random = alias("k3j4h5g6f7d8s9a0q1w2e3r4@example.org");
      assert.deepEqual([Number(random.random), random.note], [1, "shopping"]);
      assert.deepEqual(
        [Number(alias("old@example.org").deleted), alias("old@example.org").destinations],
        [1, "[]"],
      );
      assert.equal(Number(alias("nodest@example.org").deleted), 1);
      assert.deepEqual(
        [alias("fwd@example.net").smtp_quota_per_hour, alias("fwd@example.net").smtp_quota_per_day],
        [5, null],
      );

      const codesRows = await db.selectFrom("invite_codes").selectAll().orderBy("code").execute();
      const dave = await user("dave@example.net");
      // No last login in userli: the day of the last update stands in (userli's inactivity clock).
      assert.equal(dave.last_login_time, Date.UTC(2026, 10, 20) / 1000);
      assert.equal((await user("gone@example.org")).last_login_time, null);
      assert.deepEqual(
        codesRows.map((c) => [c.code, c.user_id, c.redeemed_by_id, c.redeemed_at]),
        [
          ["abc123", alice.id, dave.id, Date.UTC(2025, 4, 5, 5, 5, 5) / 1000],
          ["xyz789", alice.id, null, null],
        ],
      );
      const names = await db.selectFrom("reserved_names").select("name").orderBy("name").execute();
      assert.deepEqual(
        names.map((n) => n.name),
        ["abuse", "admin", "postmaster", "webmaster"],
      );
      const tokens = await db.selectFrom("api_tokens").selectAll().orderBy("id").execute();
      assert.deepEqual(
        tokens.map((t) => [t.name, JSON.parse(t.scopes), t.token_hash]),
        [
          ["dovecot", ["dovecot"], hashToken(fixture.tokens.dovecot)],
          ["postfix", ["postfix"], hashToken(fixture.tokens.postfix)],
          ["keycloak and retention", ["keycloak", "retention"], hashToken(fixture.tokens.keycloak)],
        ],
      );
      const settings = Object.fromEntries(
        (await db.selectFrom("settings").select(["name", "value"]).execute()).map((s) => [s.name, s.value]),
      );
      assert.equal(settings.app_name, "Example Mail");
      assert.equal(settings.weekly_report_enabled, "0");
      assert.equal(settings.postmaster_address, "");
      assert.equal(settings.project_url, undefined);
      const hooks = await db.selectFrom("webhook_endpoints").selectAll().orderBy("id").execute();
      assert.deepEqual(
        hooks.map((h) => [h.url, h.secret, JSON.parse(h.events), Number(h.enabled)]),
        [
          [
            "https://hooks.example.test/userli",
            "a-secret-of-at-least-16",
            ["user.created", "user.deleted"],
            1,
          ],
          [
            "https://hooks.example.test/all",
            "another-secret-1234",
            ["user.created", "user.deleted", "user.reset"],
            0,
          ],
        ],
      );
      const filters = await db
        .selectFrom("webhook_endpoint_domains")
        .innerJoin("domains", "domains.id", "webhook_endpoint_domains.domain_id")
        .select(["endpoint_id", "domains.name"])
        .execute();
      assert.deepEqual(filters, [{ endpoint_id: hooks[0]!.id, name: "example.org" }]);
      // Nothing fired: moved accounts are not new ones.
      assert.equal((await db.selectFrom("webhook_deliveries").select("id").execute()).length, 0);
    });

    test("a recovery token made under userli still opens the recovery box", async () => {
      const row = await db
        .selectFrom("users")
        .select("recovery_secret_box")
        .where("email", "=", "alice@example.org")
        .executeTakeFirstOrThrow();
      const pool = new CryptoPool(1);
      assert.equal(
        await openSecretBox(row.recovery_secret_box ?? "", fixture.alice.recoveryToken, pool),
        fixture.alice.privateKey,
      );
      // And the service's recovery takes it: the first step starts the waiting period.
      const services = createServices(handle, pool, { installationSecret: installationSecret() });
      const check = await services.recovery.check(
        "alice@example.org",
        fixture.alice.recoveryToken.toUpperCase(),
        { locale: "en" },
      );
      assert.equal(check.kind, "waiting");
      await db
        .updateTable("users")
        .set({ recovery_start_time: null })
        .where("email", "=", "alice@example.org")
        .execute();
      await db.deleteFrom("mail_outbox").execute();
    });

    test("a second run changes nothing, and the data is the same", () => {
      const before = dumpOf(target.url);
      const again = importUserli(target.url, source.url);
      assert.equal(again.status, 2, again.stderr);
      for (const [table, [read, added, updated]] of summary(again.stdout))
        assert.deepEqual(
          [added, updated],
          [0, 0],
          `${table} (read ${read}) changed on the second run:\n${again.stdout}`,
        );
      assert.deepEqual(dumpOf(target.url), before);
    });

    describe("through the integration API of a service on the imported database", () => {
      let service: RunningService;
      const call = async (method: string, path: string, token: string, body?: unknown) => {
        const response = await fetch(`${service.url}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body ? { "content-type": "application/json" } : {}),
          },
          body: body ? JSON.stringify(body) : undefined,
        });
        const text = await response.text();
        return { status: response.status, body: text ? JSON.parse(text) : undefined, bytes: text };
      };
      before(async () => {
        service = await startServiceProcess({
          DATABASE_URL: target.url,
          USERLI_COMPAT: "true",
          LOG_LEVEL: "silent",
        });
      });
      after(async () => {
        await service?.stop();
      });

      test("passdb returns the private key userli would have, matching userdb's public key", async () => {
        for (const [email, keys] of [
          ["alice@example.org", fixture.alice],
          ["bob@example.org", fixture.bob],
        ] as const) {
          const passdb = await call("POST", `/api/mailbox-server/${email}`, fixture.tokens.dovecot, {
            password: fixture.password,
          });
          assert.equal(passdb.status, 200, passdb.bytes);
          assert.equal(passdb.body.body.mailCryptPrivateKey, keys.privateKey);
          const userdb = await call("GET", `/api/mailbox-server/${email}`, fixture.tokens.dovecot);
          assert.equal(userdb.body.body.mailCryptPublicKey, keys.publicKey);
          assert.equal(
            publicKeyOf(passdb.body.body.mailCryptPrivateKey),
            userdb.body.body.mailCryptPublicKey,
          );
          assert.equal(userdb.body.body.mailCrypt, 2);
        }
        const quota = await call("GET", "/api/mailbox-server/alice@example.org", fixture.tokens.dovecot);
        assert.equal(quota.body.body.quota, "1024M");
      });

      test("every user signs in with the old password, and legacy hashes are upgraded by that sign-in", async () => {
        const users = [
          "alice@example.org",
          ...Object.keys(fixture.legacy),
          ...Array.from({ length: 3 }, (_, n) => `gen${n}@example.net`),
        ];
        for (const email of users) {
          const auth = await call("POST", "/api/mta/auth", fixture.tokens.postfix, {
            email,
            password: fixture.password,
          });
          assert.equal(auth.status, 200, `${email}: ${auth.bytes}`);
        }
        const rows = await db
          .selectFrom("users")
          .select(["email", "password"])
          .where("email", "in", Object.keys(fixture.legacy))
          .execute();
        for (const row of rows) assert.match(row.password, /^\$argon2id\$v=19\$m=65536,t=2,p=1\$/, row.email);
        const wrong = await call("POST", "/api/mta/auth", fixture.tokens.postfix, {
          email: "carol@example.org",
          password: "wrong",
        });
        assert.equal(wrong.status, 401);
        // Deleted, spam and "change your password" users are still treated as such.
        const gone = await call("POST", "/api/mailbox-server/gone@example.org", fixture.tokens.dovecot, {
          password: fixture.password,
        });
        assert.equal(gone.status, 404);
        const spam = await call("POST", "/api/mailbox-server/spam@example.org", fixture.tokens.dovecot, {
          password: fixture.password,
        });
        assert.equal(spam.status, 403);
        const change = await call(
          "POST",
          "/api/mailbox-server/Mixed.Case@example.com",
          fixture.tokens.dovecot,
          { password: fixture.password },
        );
        assert.equal(change.status, 403);
      });

      test("TOTP codes of the user's authenticator app and the backup codes are accepted", async () => {
        const validate = (code: string) =>
          call("POST", "/api/identity/example.org/validate/alice@example.org", fixture.tokens.keycloak, {
            credentialType: "otp",
            password: code,
          });
        assert.equal((await validate(totp(fixture.alice.totpSecret))).status, 200);
        assert.equal((await validate(fixture.alice.backupCodes[2]!)).status, 200);
        assert.equal((await validate(fixture.alice.backupCodes[2]!)).status, 403, "a backup code works once");
        assert.equal((await validate("000000")).status, 403);
        const configured = (email: string, domain: string) =>
          call("GET", `/api/identity/${domain}/configured/otp/${email}`, fixture.tokens.keycloak);
        assert.equal((await configured("alice@example.org", "example.org")).status, 200);
        // erin's TOTP was never confirmed in userli: not switched on here either.
        assert.equal((await configured("erin@example.net", "example.net")).status, 404);
      });

      test("aliases resolve and are senders; deleted ones stay taken", async () => {
        const alias = async (address: string) =>
          (await call("GET", `/api/mta/alias/${address}`, fixture.tokens.postfix)).body;
        assert.deepEqual(await alias("team@example.org"), ["alice@example.org", "bob@example.org"]);
        assert.deepEqual(await alias("k3j4h5g6f7d8s9a0q1w2e3r4@example.org"), ["alice@example.org"]);
        assert.deepEqual(await alias("fwd@example.net"), ["someone@elsewhere.test"]);
        assert.deepEqual(await alias("galias5@example.net"), ["gen5@example.net"]);
        assert.deepEqual(await alias("carol-alias@example.net"), ["carol@example.org"]);
        assert.deepEqual(await alias("old@example.org"), []);
        const senders = (await call("GET", "/api/mta/senders/team@example.org", fixture.tokens.postfix)).body;
        assert.ok(senders.includes("alice@example.org"), JSON.stringify(senders));
        const smtp = await call("GET", "/api/mta/smtp_quota/alice@example.org", fixture.tokens.postfix);
        assert.deepEqual(smtp.body, { per_hour: 10, per_day: 100 });
        // An admin token made here: the deleted addresses cannot be taken again.
        const admin = "a".repeat(64);
        await db
          .insertInto("api_tokens")
          .values({
            name: "admin",
            scopes: '["admin"]',
            token_hash: hashToken(admin),
            created_at: 0,
            last_used_at: null,
          })
          .execute();
        for (const email of ["gone@example.org", "old@example.org"]) {
          const taken = await call("POST", "/api/admin/users", admin, {
            email,
            password: "a fresh long password",
          });
          assert.equal(taken.status, 409, taken.bytes);
        }
      });

      test("WKD serves the imported key", async () => {
        const response = await fetch(
          `${service.url}/.well-known/openpgpkey/example.org/hu/${fixture.key.wkdHash}`,
        );
        assert.equal(response.status, 200);
        assert.deepEqual(Buffer.from(await response.arrayBuffer()), Buffer.from(fixture.key.data, "base64"));
      });

      test("the old API tokens work under userli's paths and scope names (USERLI_COMPAT)", async () => {
        assert.equal(
          (await call("GET", "/api/dovecot/alice@example.org", fixture.tokens.dovecot)).status,
          200,
        );
        assert.equal(
          (await call("GET", "/api/postfix/alias/team@example.org", fixture.tokens.postfix)).status,
          200,
        );
        assert.equal(
          (await call("GET", "/api/keycloak/example.org/count", fixture.tokens.keycloak)).status,
          200,
        );
        assert.equal((await call("GET", "/api/retention/users", fixture.tokens.keycloak)).status, 200);
        assert.equal(
          (await call("GET", "/api/mailbox-server/alice@example.org", fixture.tokens.dovecot)).status,
          200,
        );
        assert.equal(
          (await call("GET", "/api/dovecot/alice@example.org", fixture.tokens.postfix)).status,
          403,
        );
      });
    });
  });
}

describe("app:import:userli: addresses a purge tool reads as a wildcard", () => {
  let source: UserliDatabase;
  let target: { url: string; remove: () => Promise<void> };

  before(async () => {
    source = await createUserliDatabase("sqlite");
    target = await scratchDatabase("mas-import-");
  });
  after(async () => {
    await source?.remove();
    await target?.remove();
  });

  test("users and alias sources holding * ? or % are reported as refused rows, never imported", async () => {
    const times = { creation_time: userliTime(1_700_000_000), updated_time: userliTime(1_700_000_000) };
    await source.insert("domains", [
      {
        id: 1,
        name: "example.org",
        invitation_enabled: false,
        invitation_limit: 0,
        invitation_waiting_period_days: 7,
        ...times,
      },
    ]);
    // The SHA-512-crypt vector (test/credentials/vectors.json): a scheme the import takes.
    const hash =
      "$6$abcdefgh$dTmIYmW/LpvGK/iiDSK9zlcKIRJ33.7YE9DETLAR1zX9/2./Fv6/8dFZ1tCs/Kfp//7QeoJfyRWP7XdDzP87j1";
    const user = (id: number, email: string, deleted = false) => ({
      id,
      domain_id: 1,
      email,
      password: hash,
      password_version: 1,
      roles: '["ROLE_USER"]',
      totp_backup_codes: "[]",
      deleted,
      ...times,
    });
    await source.insert("users", [
      user(1, "plain@example.org"),
      user(2, "star*@example.org"),
      user(3, "a?b@example.org"),
      user(4, "dave%@example.org"),
      user(5, "*@example.org", true),
    ]);
    const alias = (id: number, aliasSource: string, destination: string) => ({
      id,
      source: aliasSource,
      destination,
      domain_id: 1,
      ...times,
    });
    await source.insert("aliases", [
      alias(1, "any*@example.org", "plain@example.org"),
      alias(2, "what?@example.org", "plain@example.org"),
      // a destination may lie outside and reaches no purge command: taken as it is
      alias(3, "fwd@example.org", "odd%route@elsewhere.test"),
    ]);

    const run = importUserli(target.url, source.url);
    assert.equal(run.status, 2, run.stderr);
    assert.deepEqual(listed(run.stdout, /^Refused rows/), [
      ["aliases", "1"],
      ["aliases", "2"],
      ["users", "2"],
      ["users", "3"],
      ["users", "4"],
      ["users", "5"],
    ]);
    for (const reason of [
      "users id 2: email: star*@example.org holds *, which a purge tool reads as a wildcard",
      "users id 3: email: a?b@example.org holds ?, which a purge tool reads as a wildcard",
      "users id 4: email: dave%@example.org holds %, which a purge tool reads as a wildcard",
      "users id 5: email: *@example.org holds *, which a purge tool reads as a wildcard",
      "aliases id 1: source: any*@example.org holds *, which a purge tool reads as a wildcard",
      "aliases id 2: source: what?@example.org holds ?, which a purge tool reads as a wildcard",
    ])
      assert.ok(run.stdout.includes(`  ${reason}`), `${reason}\n${run.stdout}`);
    const users = JSON.parse(runConsole(target.url, ["app:users:list", "--status", "all", "--json"]).stdout);
    assert.deepEqual(
      users.map((u: { email: string }) => u.email),
      ["plain@example.org"],
    );
    const handle = await openDatabase(target.url, { poolSize: 1 });
    try {
      const aliases = await handle.db.selectFrom("aliases").select(["source", "destinations"]).execute();
      assert.deepEqual(
        aliases.map((a) => [a.source, JSON.parse(a.destinations)]),
        [["fwd@example.org", ["odd%route@elsewhere.test"]]],
      );
    } finally {
      await handle.close();
    }
  });
});

describe("app:import:userli, interrupted and run again", () => {
  let source: UserliDatabase;
  let clean: { url: string; remove: () => Promise<void> };
  let broken: { url: string; remove: () => Promise<void> };

  before(async () => {
    source = await createUserliDatabase("sqlite");
    await fillUserli(source, 400);
    clean = await scratchDatabase("mas-import-");
    broken = await scratchDatabase("mas-import-");
  });
  after(async () => {
    await source?.remove();
    await clean?.remove();
    await broken?.remove();
  });

  test("a killed import leaves whole batches; the next run completes it to the same data", {
    timeout: 120_000,
  }, async () => {
    assert.equal(importUserli(clean.url, source.url).status, 2);
    // Rows one by one (one transaction each), so the kill lands mid-way.
    const child = spawn(consolePath, ["app:import:userli", "--from", source.url, "--batch-size", "1"], {
      env: { ...process.env, DATABASE_URL: broken.url, LOG_LEVEL: "silent" },
      stdio: "ignore",
    });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    let handle: DatabaseHandle | undefined;
    let users = 0;
    try {
      for (const deadline = Date.now() + 60_000; Date.now() < deadline && child.exitCode === null; ) {
        await new Promise((r) => setTimeout(r, 20));
        try {
          handle ??= await openDatabase(broken.url, { poolSize: 1 });
          users = Number(
            (
              await handle.db
                .selectFrom("users")
                .select((eb) => eb.fn.countAll().as("n"))
                .executeTakeFirstOrThrow()
            ).n,
          );
        } catch {
          // The schema is not there yet.
        }
        if (users >= 30) break;
      }
      child.kill("SIGKILL");
      await exited;
      const atKill = Number(
        (
          await handle!.db
            .selectFrom("users")
            .select((eb) => eb.fn.countAll().as("n"))
            .executeTakeFirstOrThrow()
        ).n,
      );
      assert.ok(atKill >= 30 && atKill < 410, `killed with ${atKill} users imported`);
    } finally {
      await handle?.close();
    }
    const again = importUserli(broken.url, source.url);
    assert.equal(again.status, 2, again.stderr);
    assert.deepEqual(canonical(dumpOf(broken.url)), canonical(dumpOf(clean.url)));
  });
});

/**
 * A dump with every generated id replaced by what it stands for (a domain's name, a user's
 * address...): ids of rows written by a rolled-back batch are skipped by PostgreSQL's sequences and
 * MariaDB's counters, so two imports of the same data may number rows differently.
 */
function canonical(lines: string[]): Record<string, unknown[]> {
  const rows = lines.slice(1).map((l) => JSON.parse(l) as { table?: string; row?: Record<string, unknown> });
  const names = new Map<string, Map<unknown, unknown>>();
  const naturalKey: Record<string, string> = {
    domains: "name",
    users: "email",
    webhook_endpoints: "url",
    aliases: "source",
  };
  for (const { table, row } of rows) {
    if (!table || !row || !naturalKey[table]) continue;
    if (!names.has(table)) names.set(table, new Map());
    names.get(table)!.set(row.id, row[naturalKey[table]]);
  }
  const references: Record<string, string> = {
    domain_id: "domains",
    user_id: "users",
    uploader_id: "users",
    redeemed_by_id: "users",
    endpoint_id: "webhook_endpoints",
  };
  const out: Record<string, unknown[]> = {};
  for (const { table, row } of rows) {
    if (!table || !row) continue;
    const copy: Record<string, unknown> = {};
    for (const [column, value] of Object.entries(row)) {
      if (column === "id" && table !== "webhook_deliveries") continue;
      // Keys arrive when they are imported: their times are the import's.
      if (table === "openpgp_keys" && (column === "created_at" || column === "updated_at")) continue;
      const referenced = references[column];
      copy[column] = referenced && value !== null ? names.get(referenced)?.get(value) : value;
      // Hashes made by the import have salts of their own: the same codes, other bytes.
      if (column === "totp_backup_codes") copy[column] = (JSON.parse(String(value)) as string[]).length;
      if (column === "password" && String(value).startsWith("!deleted!")) copy[column] = "!deleted!";
    }
    out[table] = [...(out[table] ?? []), copy];
  }
  for (const list of Object.values(out))
    list.sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
  return out;
}

const hasScript = spawnSync("script", ["--version"]).status === 0;

test("on a terminal the import shows a progress bar", {
  skip: hasScript ? false : "util-linux script is not installed",
}, async () => {
  const source = await createUserliDatabase("sqlite");
  const target = await scratchDatabase("mas-import-");
  try {
    await fillUserli(source, 5);
    const command = `${consolePath} app:import:userli --dry-run --from '${source.url}'`;
    const run = spawnSync("script", ["-qec", command, "/dev/null"], {
      env: { ...process.env, DATABASE_URL: target.url, LOG_LEVEL: "silent", COLUMNS: "120" },
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.match(run.stdout, /users\s+\[[█░]+\] 19\/19 rows/);
    assert.match(run.stdout, /all tables\s+\[[█░]+\] \d+\/\d+ rows/);
  } finally {
    await source.remove();
    await target.remove();
  }
});
