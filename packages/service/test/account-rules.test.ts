import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Kysely } from "kysely";
import { Migrator } from "kysely/migration";
import { parseAddress, parseNewAddress } from "../src/accounts/addresses.ts";
import { MailCryptLevel, mailCryptFor } from "../src/accounts/mail-crypt-policy.ts";
import { SettingsService } from "../src/accounts/settings.ts";
import { openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import { migrations } from "../src/db/migrations/index.ts";
import { columnTypes } from "../src/db/migrations/types.ts";
import { removeInactiveUsers } from "../src/jobs/jobs.ts";
import { createLogger } from "../src/logger.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";
import { byTest } from "./helpers/fixtures.ts";
import { runConsole } from "./helpers/process.ts";
import { startService, type TestService } from "./helpers/service.ts";

const password = "correct horse battery staple";

describe("one owner per account rule", () => {
  let service: TestService;
  let admin: string;
  const call = (method: string, path: string, json?: unknown) =>
    service.request(method, `/api/admin${path}`, { token: admin, ...(json ? { json } : {}) });

  before(async () => {
    service = await startService();
    admin = await service.token("admin");
    await service.services.domains.create("example.org");
    await service.services.webhooks.create({
      url: "http://127.0.0.1:9/hook",
      events: ["user.created"],
      secret: "a webhook secret of some length",
    });
  });
  after(() => service.close());

  describe("user.created", () => {
    const createdRows = async (email: string) =>
      (
        await service.services.database.db
          .selectFrom("webhook_deliveries")
          .select("body")
          .where("type", "=", "user.created")
          .execute()
      ).filter((row) => JSON.parse(row.body).data.email === email);

    test("is recorded for every creation path: admin API, console, the service itself", async () => {
      const viaApi = await call("POST", "/users", { email: "api@example.org", password, mailCrypt: false });
      assert.equal(viaApi.status, 201, viaApi.text);
      assert.equal((await createdRows("api@example.org")).length, 1);

      // A caller of UserService.create that passes nothing (as the web interface will).
      await service.services.users.create({ email: "direct@example.org", password, mailCrypt: false });
      assert.equal((await createdRows("direct@example.org")).length, 1);
    });

    test("console-created users produce a user.created delivery too", async () => {
      const dir = mkdtempSync(join(tmpdir(), "mas-rules-"));
      const { url, drop } = await freshDatabaseUrl(join(dir, "console.sqlite"));
      try {
        for (const args of [
          ["app:migrate"],
          ["app:domain:create", "example.org"],
          ["app:webhook:create", "--url", "http://127.0.0.1:9/hook", "--events", "user.created"],
          ["app:user:create", "--user", "console@example.org", "--password", password],
        ]) {
          const result = runConsole(url, args);
          assert.equal(result.status, 0, `${args[0]}: ${result.stderr}`);
        }
        const database = await openDatabase(url);
        try {
          const rows = await database.db.selectFrom("webhook_deliveries").select(["type", "body"]).execute();
          assert.deepEqual(
            rows.map((row) => [row.type, JSON.parse(row.body).data.email]),
            [["user.created", "console@example.org"]],
          );
        } finally {
          await database.close();
        }
      } finally {
        await drop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe("MailCrypt: one rule for create, reset, restore and sign-in", () => {
    test("the rule's table", () => {
      const levels = [0, 1, 2, 3];
      const at = (event: Parameters<typeof mailCryptFor>[1], subject = {}) =>
        levels.map((level) => mailCryptFor(level, event, subject));
      assert.deepEqual(at("create"), ["no-keys", "no-keys", "new-keys", "new-keys"]);
      assert.deepEqual(at("create", { requested: true }), ["new-keys", "new-keys", "new-keys", "new-keys"]);
      assert.deepEqual(at("create", { requested: false }), ["no-keys", "no-keys", "no-keys", "no-keys"]);
      // Reset: as a create without a choice, unless the user has MailCrypt on (kept at every level).
      assert.deepEqual(at("reset", { userFlag: false }), at("create"));
      assert.deepEqual(at("reset", { userFlag: true }), at("create", { requested: true }));
      assert.deepEqual(at("restore"), at("create"));
      assert.deepEqual(at("sign-in", { userFlag: false, hasKeys: false }), [
        "keep",
        "keep",
        "keep",
        "new-keys-without-recovery",
      ]);
      assert.deepEqual(
        at("sign-in", { userFlag: true, hasKeys: false })[MailCryptLevel.allUsers],
        "new-keys-without-recovery",
      );
      assert.deepEqual(at("sign-in", { userFlag: false, hasKeys: true }), ["keep", "keep", "keep", "keep"]);
    });

    const setLevel = (level: number) => service.services.settings.update({ mail_crypt: level });
    const stored = (email: string) =>
      service.services.database.db
        .selectFrom("users")
        .select(["mail_crypt", "mail_crypt_public_key", "mail_crypt_secret_box", "recovery_secret_box"])
        .where("email", "=", email)
        .executeTakeFirstOrThrow();

    test("create, reset and restore follow it at levels 1 and 2; no box under an old password survives", async () => {
      const { users, lifecycle, signIn } = service.services;
      await setLevel(1);
      const plain = await users.create({ email: "mc-plain@example.org", password });
      assert.equal(plain.recoveryToken, null, "level 1 without a choice: no keys");
      const chosen = await users.create({ email: "mc-chosen@example.org", password, mailCrypt: true });
      assert.ok(chosen.recoveryToken, "level 1 with a choice: keys and a recovery token");
      const before = await stored("mc-chosen@example.org");

      const newPassword = "another long password";
      const reset = await lifecycle.reset("mc-chosen@example.org", newPassword, byTest);
      assert.ok(reset.recoveryToken, "the user's own choice is kept on reset");
      const after = await stored("mc-chosen@example.org");
      assert.equal(Number(after.mail_crypt), 1);
      assert.notEqual(after.mail_crypt_public_key, before.mail_crypt_public_key);
      const unlocked = await signIn.signIn("mc-chosen@example.org", newPassword, { unlockMailCrypt: true });
      assert.equal(unlocked.kind === "ok" && unlocked.mailCrypt.state, "unlocked");

      assert.equal((await lifecycle.reset("mc-plain@example.org", newPassword, byTest)).recoveryToken, null);
      await lifecycle.delete("mc-chosen@example.org", byTest);
      const restored = await lifecycle.restore("mc-chosen@example.org", password, byTest);
      assert.equal(restored.recoveryToken, null, "level 1: a restore is a create without a choice");
      assert.deepEqual(
        { ...(await stored("mc-chosen@example.org")), mail_crypt: 0 },
        {
          mail_crypt: 0,
          mail_crypt_public_key: null,
          mail_crypt_secret_box: null,
          recovery_secret_box: null,
        },
      );
      assert.equal(Number((await stored("mc-chosen@example.org")).mail_crypt), 0);
      const signedIn = await signIn.signIn("mc-chosen@example.org", password, { unlockMailCrypt: true });
      assert.equal(signedIn.kind === "ok" && signedIn.mailCrypt.state, "off");

      await setLevel(2);
      await lifecycle.delete("mc-chosen@example.org", byTest);
      assert.ok((await lifecycle.restore("mc-chosen@example.org", password, byTest)).recoveryToken);
      assert.ok((await lifecycle.reset("mc-plain@example.org", password, byTest)).recoveryToken);
      const optOut = await users.create({ email: "mc-optout@example.org", password, mailCrypt: false });
      assert.equal(optOut.recoveryToken, null);
    });

    test("level 3: a sign-in without keys makes them, also for a user whose flag is on without keys", async () => {
      const { users, signIn } = service.services;
      await setLevel(2);
      await users.create({ email: "mc-later@example.org", password, mailCrypt: false });
      await users.create({ email: "mc-broken@example.org", password, mailCrypt: false });
      // A flag without a key (left by older software): nothing could ever be reported for it.
      await service.services.database.db
        .updateTable("users")
        .set({ mail_crypt: 1 })
        .where("email", "=", "mc-broken@example.org")
        .execute();
      await setLevel(3);
      for (const email of ["mc-later@example.org", "mc-broken@example.org"]) {
        const result = await signIn.signIn(email, password, { unlockMailCrypt: true });
        assert.equal(result.kind === "ok" && result.mailCrypt.state, "unlocked", email);
        const row = await stored(email);
        assert.equal(Number(row.mail_crypt), 1);
        assert.ok(row.mail_crypt_public_key);
        assert.equal(row.recovery_secret_box, null, "no recovery token at sign-in");
      }
      await setLevel(2);
    });
  });

  describe("last login: one writer", () => {
    const lastLogin = async (email: string) =>
      (
        await service.services.database.db
          .selectFrom("users")
          .select("last_login_time")
          .where("email", "=", email)
          .executeTakeFirstOrThrow()
      ).last_login_time;
    const today = () => Math.floor(Date.now() / 86_400_000) * 86400;

    test("sign-in records the day, touch the exact time if newer, restore the day if newer, an admin any value", async () => {
      const { users, signIn, retention, lifecycle } = service.services;
      await users.create({ email: "seen@example.org", password, mailCrypt: false });
      assert.equal(await lastLogin("seen@example.org"), null);
      assert.equal((await signIn.signIn("seen@example.org", password)).kind, "ok");
      assert.equal(await lastLogin("seen@example.org"), today());

      const exact = Math.floor(Date.now() / 1000) - 5;
      await retention.touch("seen@example.org", exact);
      assert.equal(await lastLogin("seen@example.org"), exact, "a touch stores the exact time");
      await retention.touch("seen@example.org", exact - 3600);
      assert.equal(await lastLogin("seen@example.org"), exact, "an older touch changes nothing");
      assert.equal((await signIn.signIn("seen@example.org", password)).kind, "ok");
      assert.equal(await lastLogin("seen@example.org"), exact, "a sign-in never moves it back to 00:00");

      await lifecycle.delete("seen@example.org", byTest);
      await lifecycle.restore("seen@example.org", password, byTest);
      assert.equal(await lastLogin("seen@example.org"), exact, "a restore keeps a newer exact time");

      const response = await call("PATCH", "/users/seen@example.org", { lastLoginTime: 1000 });
      assert.equal(response.status, 200, response.text);
      assert.equal(await lastLogin("seen@example.org"), 1000, "an admin's correction may go back");
      await lifecycle.delete("seen@example.org", byTest);
      await lifecycle.restore("seen@example.org", password, byTest);
      assert.equal(await lastLogin("seen@example.org"), today(), "a restore counts as activity");
      assert.equal((await call("PATCH", "/users/seen@example.org", { lastLoginTime: null })).status, 200);
      assert.equal(await lastLogin("seen@example.org"), null);
    });

    test("no other module writes users.last_login_time", () => {
      const src = new URL("../src/", import.meta.url);
      const writers = readdirSync(src, { recursive: true, encoding: "utf8" })
        .filter((file) => file.endsWith(".ts") && !file.includes("migrations"))
        .filter((file) => /last_login_time:/.test(readFileSync(new URL(file, src), "utf8")))
        .filter((file) => !file.endsWith("db/schema.ts"));
      // The userli importer copies the stored value across (no sign-in happens), as it copies hashes.
      assert.deepEqual(writers, ["accounts/activity.ts", "import/userli.ts"]);
    });
  });

  describe("inactivity: one pair of periods for the retention list and the removal job", () => {
    const day = 86400;
    const inactiveFor = async (local: string, days: number) => {
      await service.services.users.create({ email: `${local}@example.org`, password, mailCrypt: false });
      await service.services.database.db
        .updateTable("users")
        .set({ last_login_time: Math.floor(Date.now() / 1000) - days * day })
        .where("email", "=", `${local}@example.org`)
        .execute();
    };
    const job = () =>
      removeInactiveUsers(
        {
          db: service.services.database.db,
          logger: createLogger("silent"),
          settings: service.services.settings,
          lifecycle: service.services.lifecycle,
          webhooks: service.services.webhooks,
        },
        { dryRun: true, report: (email) => wouldRemove.push(email) },
      );
    let wouldRemove: string[] = [];
    const listed = async () => {
      const retention = await service.token("retention");
      const response = await service.request("GET", "/api/retention/users", { token: retention });
      assert.equal(response.status, 200, response.text);
      return (response.body as string[]).filter((email) => email.startsWith("idle"));
    };

    test("defaults: listed after 730 days, removed 7 days later", async () => {
      const all = await service.services.settings.all();
      assert.equal(all.inactive_user_days, 730);
      assert.equal(all.inactive_user_removal_grace_days, 7);
      await inactiveFor("idle729", 729);
      await inactiveFor("idle731", 731);
      await inactiveFor("idle738", 738);
      assert.deepEqual(await listed(), ["idle731@example.org", "idle738@example.org"]);
      wouldRemove = [];
      await job();
      assert.deepEqual(wouldRemove, ["idle738@example.org"]);
    });

    test("the operator's period moves both: whoever is removed was listed first", async () => {
      await service.services.settings.update({
        inactive_user_days: 600,
        inactive_user_removal_grace_days: 10,
      });
      await inactiveFor("idle605", 605);
      await inactiveFor("idle611", 611);
      assert.deepEqual(await listed(), [
        "idle729@example.org",
        "idle731@example.org",
        "idle738@example.org",
        "idle605@example.org",
        "idle611@example.org",
      ]);
      wouldRemove = [];
      await job();
      assert.deepEqual(wouldRemove.sort(), [
        "idle611@example.org",
        "idle729@example.org",
        "idle731@example.org",
        "idle738@example.org",
      ]);
      await service.services.settings.update({
        inactive_user_days: 730,
        inactive_user_removal_grace_days: 7,
      });
    });

    test("a stored inactive_user_days keeps deleting after exactly that many days after the upgrade", async () => {
      for (const [stored, listedDays, graceDays] of [
        [800, 730, 70],
        [737, 730, 7],
        [600, 593, 7],
        [33, 30, 3],
      ] as const) {
        const dir = mkdtempSync(join(tmpdir(), "mas-migrate-"));
        const { url, drop } = await freshDatabaseUrl(join(dir, "old.sqlite"));
        const database = await openDatabase(url);
        try {
          const context = { dialect: database.dialect, types: columnTypes(database.dialect) };
          const migrator = new Migrator({
            db: database.db,
            provider: {
              getMigrations: async () =>
                Object.fromEntries(
                  Object.entries(migrations).map(([name, m]) => [
                    name,
                    { up: (db: Kysely<unknown>) => m.up(db, context) },
                  ]),
                ),
            },
            migrationTableName: "schema_migrations",
            migrationLockTableName: "schema_migrations_lock",
          });
          const before = await migrator.migrateTo("0002-webhooks-and-jobs");
          assert.equal(before.error, undefined);
          await database.db
            .insertInto("settings")
            .values({ name: "inactive_user_days", value: String(stored), updated_at: 0 })
            .execute();
          await migrateToLatest(database);
          const settings = await new SettingsService(database.db).all();
          assert.deepEqual(
            [settings.inactive_user_days, settings.inactive_user_removal_grace_days],
            [listedDays, graceDays],
            `stored ${stored}`,
          );
        } finally {
          await database.close();
          await drop();
          rmSync(dir, { recursive: true, force: true });
        }
      }
    });
  });

  describe("managed domain and active user: one query each", () => {
    test("no module of src but accounts/queries.ts spells either question itself", () => {
      const src = new URL("../src/", import.meta.url);
      const spelled = [];
      for (const file of readdirSync(src, { recursive: true, encoding: "utf8" })) {
        if (!file.endsWith(".ts") || file === "accounts/queries.ts") continue;
        const text = readFileSync(new URL(file, src), "utf8");
        if (
          /selectFrom\("domains"\)(?:(?!selectFrom|updateTable|deleteFrom)[^;])*?\.where\("name"/s.test(text)
        )
          spelled.push(`${file}: domain`);
        if (
          /(?:selectFrom|updateTable)\("users"\)(?:(?!selectFrom|updateTable|deleteFrom)[^;])*?\.where\("deleted", "=", (?:0|activeFlag)\)/s.test(
            text,
          )
        )
          spelled.push(`${file}: active user`);
      }
      assert.deepEqual(spelled, []);
    });

    test("every path answers the same for a managed domain in any spelling and for a deleted user", async () => {
      const { users, lifecycle, identity, domains, signIn } = service.services;
      await users.create({ email: "gone@example.org", password, mailCrypt: false });
      await lifecycle.delete("gone@example.org", byTest);
      assert.equal((await domains.find("EXAMPLE.org."))?.name ?? null, null, "a trailing dot is not a name");
      assert.equal((await domains.find("EXAMPLE.org"))?.name, "example.org");
      assert.equal(await identity.domainId("Example.ORG"), (await domains.get("example.org")).id);
      await assert.rejects(users.getActive("gone@example.org"), /user not found/);
      await assert.rejects(
        identity.user(await identity.domainId("example.org"), "example.org", "gone"),
        /not found/,
      );
      assert.equal((await signIn.signIn("gone@example.org", password)).kind, "unknown");
      const alias = await call("POST", "/aliases", {
        source: "a-gone@example.org",
        owner: "gone@example.org",
      });
      assert.equal(alias.status, 422, alias.text);
      const foreign = await call("POST", "/users", { email: "x@not-here.org", password });
      assert.equal(foreign.status, 422);
      assert.match(foreign.text, /not managed here/);
    });
  });

  describe("one address rule with the janitor", () => {
    const cases: { address: string; new: string | null; known: string | null; why: string }[] = JSON.parse(
      readFileSync(new URL("../../janitor/test/address-cases.json", import.meta.url), "utf8"),
    );

    test("the service's copy of the rule is the janitor's, byte for byte, and agrees on every case", () => {
      assert.equal(
        readFileSync(new URL("../src/accounts/address-syntax.ts", import.meta.url), "utf8"),
        readFileSync(new URL("../../janitor/src/address-syntax.ts", import.meta.url), "utf8"),
      );
      for (const c of cases) {
        assert.equal(parseNewAddress(c.address)?.email ?? null, c.new, `new ${JSON.stringify(c.address)}`);
        assert.equal(parseAddress(c.address)?.email ?? null, c.known, `known ${JSON.stringify(c.address)}`);
      }
    });

    test("the admin API creates exactly the new addresses, as users and as alias sources", async () => {
      await service.services.domains.create("sub.example.org");
      await service.services.domains.create("xn--bcher-kva.example");
      for (const [i, c] of cases.entries()) {
        // A NUL byte is refused before any rule looks at the address (http/params.ts): 400.
        const refused = c.address.includes("\0") ? 400 : 422;
        const user = await call("POST", "/users", { email: c.address, password, mailCrypt: false });
        assert.equal(
          user.status,
          c.new === null ? refused : 201,
          `${JSON.stringify(c.address)}: ${user.text}`,
        );
        if (c.new !== null) assert.equal(user.body.email, c.new);
        const source = c.address.replace(/^[^@]*/, (local) => `${local}${i}`);
        const alias = await call("POST", "/aliases", { source, destinations: ["dest@example.net"] });
        const expected = parseNewAddress(source.trim()) === null ? refused : 201; // a source is trimmed
        assert.equal(alias.status, expected, `alias ${JSON.stringify(source)}: ${alias.text}`);
      }
    });

    test("dave%@, *@, `id`@ and a Cyrillic look-alike are refused; a lookup never folds the Kelvin sign", async () => {
      for (const email of [
        "dave%@example.org",
        "*@example.org",
        "`id`@example.org",
        "pl\u0430in@example.org",
      ]) {
        const response = await call("POST", "/users", { email, password, mailCrypt: false });
        assert.equal(response.status, 422, `${email}: ${response.text}`);
      }
      assert.equal((await call("POST", "/users", { email: "kelvin@example.org", password })).status, 201);
      assert.equal((await call("GET", "/users/kelvin@example.org")).status, 200);
      assert.equal(
        (await call("GET", `/users/${encodeURIComponent("\u212aelvin@example.org")}`)).status,
        404,
      );
      assert.equal((await call("POST", "/domains", { name: "b\u00fccher.example" })).status, 422);
      assert.equal((await call("POST", "/domains", { name: "xn--tst-qla.example" })).status, 201);
    });

    test("alias destinations may be outside addresses the service would not create, never unsafe ones", async () => {
      const ok = await call("POST", "/aliases", {
        source: "fwd@example.org",
        destinations: ["o'brien@example.net", "j\u00fcrgen@example.net"],
      });
      assert.equal(ok.status, 201, ok.text);
      const bad = await call("POST", "/aliases", {
        source: "fwd2@example.org",
        destinations: ["a/b@example.net"],
      });
      assert.equal(bad.status, 422);
    });
  });
});
