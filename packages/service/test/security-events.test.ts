import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type Actor, consoleActor, userActor } from "../src/accounts/admin-scope.ts";
import { ownerOrigin } from "../src/accounts/security-events.ts";
import { currentTotpCode } from "../src/credentials/totp.ts";
import { openDatabase } from "../src/db/database.ts";
import { createLogger } from "../src/logger.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";
import { password } from "./helpers/fixtures.ts";
import { runConsole } from "./helpers/process.ts";
import { startService, type TestService } from "./helpers/service.ts";
import { fieldError, WebClient } from "./helpers/web-client.ts";

/**
 * The security event log (accounts/security-events.ts) over HTTP on the database TEST_DATABASE_URL
 * names: every change of a password, recovery, second factor or sessions, and every deletion, is
 * written with the change (a refused change writes nothing) with its door, client address and
 * acting admin, never a secret; owners read their own at /account/activity, admins all of it (a
 * domain admin its domain's) through the admin API and /admin/security-events; the daily job prunes.
 */
describe("security event log", () => {
  let service: TestService;
  let token: string;
  /** Every secret the tests handle: none may appear in any row. */
  const secrets: string[] = [password];

  before(async () => {
    service = await startService({ web: true });
    token = await service.token("admin");
    const { domains, users } = service.services;
    await domains.create("example.org");
    await domains.create("example.net");
    for (const [email, roles] of [
      ["admin@example.org", ["ROLE_ADMIN"]],
      ["da@example.org", ["ROLE_DOMAIN_ADMIN"]],
      ["alice@example.org", []],
      ["bob@example.org", []],
      ["carol@example.net", []],
    ] as const) {
      const created = await users.create({ email, password, roles: [...roles], mailCrypt: true });
      if (created.recoveryToken) secrets.push(created.recoveryToken);
    }
  });
  after(async () => {
    await service?.close();
  });

  /**
   * This file looks at the events of changes; the sign-in outcomes the guard writes alongside
   * (sign-in-attacks.test.ts looks at those) are taken out before each read.
   */
  const dropSignInEvents = () =>
    service.services.database.db
      .deleteFrom("security_events")
      .where((eb) => eb.or([eb("type", "like", "sign_in.%"), eb("type", "like", "second_factor.%")]))
      .execute();
  const rows = async (email?: string) => {
    await dropSignInEvents();
    let query = service.services.database.db.selectFrom("security_events").selectAll().orderBy("id");
    if (email) query = query.where("email", "=", email);
    return query.execute();
  };
  const types = async (email: string) => (await rows(email)).map((row) => row.type);
  const api = async (path: string) => {
    await dropSignInEvents();
    const answer = await service.request("GET", `/api/admin/security-events${path}`, { token });
    assert.equal(answer.status, 200, answer.text);
    return answer.body as { items: Record<string, any>[]; total: number };
  };

  test("a password change on the web is written with its door and address; a refused one writes nothing", async () => {
    const other = new WebClient(service.url);
    await other.signIn("alice@example.org");
    const web = new WebClient(service.url);
    await web.signIn("alice@example.org");
    await web.get("/account/password");
    const before = await rows("alice@example.org");
    // Refused: wrong current password, a new password the policy refuses.
    const wrong = await web.post("/account/password", {
      currentPassword: "not the password at all",
      newPassword: "another long passphrase",
      newPasswordRepeat: "another long passphrase",
    });
    assert.equal(wrong.status, 422);
    const short = await web.post("/account/password", {
      currentPassword: password,
      newPassword: "short",
      newPasswordRepeat: "short",
    });
    assert.equal(short.status, 422);
    assert.deepEqual(await rows("alice@example.org"), before, "a refused change writes no event");

    const newPassword = "alice's brand new passphrase";
    secrets.push(newPassword);
    const changed = await web.post("/account/password", {
      currentPassword: password,
      newPassword,
      newPasswordRepeat: newPassword,
    });
    assert.equal(changed.location, "/account");
    const written = (await rows("alice@example.org")).slice(before.length);
    assert.deepEqual(
      written.map((row) => [
        row.type,
        row.door,
        row.client_address,
        row.actor,
        JSON.parse(row.detail ?? "null"),
      ]),
      [
        ["password.changed", "web", "127.0.0.1", null, { how: "changed" }],
        ["sessions.ended", "web", "127.0.0.1", null, { sessions: 1, because: "password_changed" }],
      ],
    );
    const alice = await service.services.users.get("alice@example.org");
    const org = await service.services.domains.get("example.org");
    assert.ok(written.every((row) => row.user_id === alice.id && row.domain_id === org.id));
    // Back to the shared password, through the webmail API with the user's address in X-Client-Address.
    const webmail = await service.token("webmail");
    const refused = await service.request("POST", "/api/webmail/password", {
      token: webmail,
      json: { email: "alice@example.org", password: newPassword, newPassword: "short" },
    });
    assert.equal(refused.status, 422);
    const answer = await service.request("POST", "/api/webmail/password", {
      token: webmail,
      json: { email: "alice@example.org", password: newPassword, newPassword: password },
      headers: { "x-client-address": "198.51.100.7" },
    });
    assert.equal(answer.status, 200, answer.text);
    // The web session that changed the password before ends with this change.
    assert.deepEqual(
      (await rows("alice@example.org"))
        .slice(before.length + 2)
        .map((row) => [row.type, row.door, row.client_address, row.actor]),
      [
        ["password.changed", "webmail", "198.51.100.7", null],
        ["sessions.ended", "webmail", "198.51.100.7", null],
      ],
    );
  });

  test("admin changes name the admin: reset, two-factor on and off, ended sessions, deletion; nothing when nothing changed", async () => {
    const client = new WebClient(service.url);
    await client.signIn("bob@example.org");
    const reset = await service.request("POST", "/api/admin/users/bob@example.org/reset", {
      token,
      json: { password },
    });
    assert.equal(reset.status, 200, reset.text);
    if (reset.body.recoveryToken) secrets.push(reset.body.recoveryToken);
    const totp = await service.request("PUT", "/api/admin/users/bob@example.org/totp", { token, json: {} });
    assert.equal(totp.status, 200, totp.text);
    secrets.push(totp.body.secret, ...totp.body.backupCodes);
    assert.equal(
      (await service.request("DELETE", "/api/admin/users/bob@example.org/totp", { token })).status,
      204,
    );
    // Off already: no second event.
    await service.request("DELETE", "/api/admin/users/bob@example.org/totp", { token });
    // A domain admin who may not manage the user changes nothing and writes nothing.
    const count = (await rows("carol@example.net")).length;
    const da = new WebClient(service.url);
    await da.signIn("da@example.org");
    await da.get("/admin/users");
    assert.equal((await da.post("/admin/users/carol%40example.net/sessions/end")).status, 403);
    assert.equal((await rows("carol@example.net")).length, count);
    // An admin ends bob's sessions on the admin page.
    await client.signIn("bob@example.org");
    const admin = new WebClient(service.url);
    await admin.signIn("admin@example.org");
    await admin.get("/admin/users/bob%40example.org");
    const ended = await admin.post("/admin/users/bob%40example.org/sessions/end");
    assert.equal(ended.status, 303);
    const events = (await rows("bob@example.org")).map((row) => [
      row.type,
      row.door,
      row.actor,
      JSON.parse(row.detail ?? "null"),
    ]);
    assert.deepEqual(events, [
      ["password.changed", "admin_api", "api-token:test token", { how: "reset" }],
      ["sessions.ended", "admin_api", "api-token:test token", { sessions: 1, because: "password_reset" }],
      ["two_factor.enabled", "admin_api", "api-token:test token", null],
      ["two_factor.disabled", "admin_api", "api-token:test token", { how: "switched_off" }],
      ["sessions.ended", "web", "admin@example.org", { sessions: 1, because: "ended_by_admin" }],
    ]);
    assert.equal((await rows("bob@example.org")).at(-1)?.client_address, "127.0.0.1");
  });

  test("two-factor on and off, sign-out everywhere, recovery and deletion by the owner on the web", async () => {
    const { database, recovery, users } = service.services;
    const email = "carol@example.net";
    const web = new WebClient(service.url);
    await web.signIn(email);
    await web.get("/account/twofactor");
    await web.post("/account/twofactor/enable", { password });
    const scan = await web.get("/account/twofactor/confirm");
    const secret = /<code id="totp-secret">([^<]+)<\/code>/.exec(scan.text)?.[1]?.replace(/\s+/g, "") ?? "";
    assert.match(secret, /^[A-Z2-7]{16,}$/);
    secrets.push(secret);
    const wrongCode = await web.post("/account/twofactor/confirm", { code: "000000" });
    assert.equal(wrongCode.status, 422);
    assert.deepEqual(await types(email), [], "a wrong code switches nothing on");
    const codes = await web.post("/account/twofactor/confirm", { code: currentTotpCode(secret, Date.now()) });
    assert.equal(codes.status, 200);
    secrets.push(...(codes.text.match(/\b\d{6}\b/g) ?? []).filter((code) => code !== "000000"));
    await web.post("/account/twofactor/backup-codes", { ack: "yes" });
    await web.get("/account/twofactor");
    assert.equal((await web.post("/account/twofactor/disable", { password: "wrong password!" })).status, 422);
    await web.post("/account/twofactor/disable", { password });
    assert.deepEqual(await types(email), ["two_factor.enabled", "two_factor.disabled"]);

    // Recovery: started (by anyone with the token), then stopped by the owner's new token.
    const user = await users.get(email);
    const tokenAnswer = await service.services.lifecycle.renewRecoveryToken(
      await service.services.signIn.confirmPassword(user, password),
      ownerOrigin("web", "192.0.2.1"),
    );
    secrets.push(tokenAnswer);
    const request = { client: "203.0.113.9", locale: "en" as const };
    assert.equal(
      (await recovery.check(email, "00000000-0000-4000-8000-000000000000", request)).kind,
      "wrong",
    );
    assert.equal((await recovery.check(email, tokenAnswer, request)).kind, "waiting");
    await web.get("/account/recovery-token");
    const renewed = await web.post("/account/recovery-token", { password });
    const newToken = /<code id="recovery-token">([^<]+)<\/code>/.exec(renewed.text)?.[1] ?? "";
    assert.ok(newToken.length >= 20, newToken);
    secrets.push(newToken);
    // Started again with the new token, the waiting period over: completed.
    assert.equal((await recovery.check(email, newToken, request)).kind, "waiting");
    await database.db
      .updateTable("users")
      .set({ recovery_start_time: Math.floor(Date.now() / 1000) - 3 * 86400 })
      .where("email", "=", email)
      .execute();
    const recoveredPassword = "carol recovered her passphrase";
    secrets.push(recoveredPassword);
    const done = await recovery.complete(email, newToken, recoveredPassword, request);
    assert.equal(done.kind, "done");
    if (done.kind === "done") secrets.push(done.recoveryToken);
    const recoveryEvents = (await rows(email)).slice(2).map((row) => [row.type, row.client_address]);
    assert.deepEqual(recoveryEvents, [
      ["recovery_token.renewed", "192.0.2.1"],
      ["recovery.started", "203.0.113.9"],
      ["recovery_token.renewed", "127.0.0.1"],
      ["recovery.stopped", "127.0.0.1"],
      ["recovery.started", "203.0.113.9"],
      ["recovery.completed", "203.0.113.9"],
      ["password.changed", "203.0.113.9"],
      ["sessions.ended", "203.0.113.9"],
    ]);

    // Sign out everywhere, then deletion by the owner.
    const owner = new WebClient(service.url);
    await owner.signIn(email, recoveredPassword);
    await owner.get("/account/sessions");
    assert.equal((await owner.post("/account/sessions/end-all")).status, 303);
    await owner.signIn(email, recoveredPassword);
    await owner.get("/account/delete");
    assert.equal((await owner.post("/account/delete", { password: "not it at all" })).status, 422);
    assert.equal((await owner.post("/account/delete", { password: recoveredPassword })).status, 303);
    assert.deepEqual(
      (await rows(email)).slice(-3).map((row) => [row.type, row.door, JSON.parse(row.detail ?? "null")]),
      [
        ["sessions.ended", "web", { sessions: 1, because: "signed_out_everywhere" }],
        ["sessions.ended", "web", { sessions: 1, because: "account_deleted" }],
        ["account.deleted", "web", null],
      ],
    );
  });

  test("no row holds a password, recovery token, TOTP secret or backup code", async () => {
    const all = await rows();
    assert.ok(all.length >= 20, `${all.length} events`);
    // The text columns (numbers such as times could hold a six-digit backup code by chance).
    const text = JSON.stringify(
      all.map((row) => [row.type, row.email, row.door, row.client_address, row.actor, row.detail]),
    );
    for (const secret of secrets) assert.ok(!text.includes(secret), `an event holds a secret: ${secret}`);
  });

  test("the admin API filters by address, type and time, pages, and refuses bad filters with 422", async () => {
    const all = await api("?limit=500");
    assert.equal(all.total, (await rows()).length);
    assert.deepEqual(Object.keys(all.items[0] ?? {}), [
      "id",
      "at",
      "type",
      "result",
      "email",
      "domain",
      "door",
      "clientAddress",
      "actor",
      "detail",
    ]);
    const bob = await api("?email=Bob@Example.org");
    assert.equal(bob.total, 5);
    assert.ok(bob.items.every((e) => e.email === "bob@example.org" && e.domain === "example.org"));
    const changes = await api("?type=password.changed");
    assert.ok(changes.items.every((e) => e.type === "password.changed" && e.result === "changed"));
    assert.equal(changes.total, 4);
    assert.equal((await api("?type=password.changed&email=bob@example.org")).total, 1);
    const future = Math.floor(Date.now() / 1000) + 3600;
    assert.equal((await api(`?since=${future}`)).total, 0);
    assert.equal((await api("?since=0")).total, all.total);
    const first = await api("?limit=3");
    const second = await api("?limit=3&offset=3");
    assert.equal(first.items.length, 3);
    assert.ok(first.items[2]?.id > second.items[0]?.id, "newest first, pages follow each other");
    for (const [query, message] of [
      ["?type=sign_in.exploded", "type: unknown event type sign_in.exploded"],
      ["?email=not-an-address", "email: not an e-mail address"],
      // A NUL byte is refused before any rule looks at the value (http/params.ts).
      ["?email=bob%00@example.org", "invalid input: NUL character"],
      ["?since=yesterday", "since: must be a whole number"],
      ["?limit=501", "limit: at most 500"],
    ] as const) {
      const answer = await service.request("GET", `/api/admin/security-events${query}`, { token });
      assert.equal(answer.status, query.includes("%00") ? 400 : 422, query);
      assert.deepEqual(answer.body, { message }, query);
    }
    assert.equal(
      (await service.request("GET", "/api/admin/security-events", { token: await service.token("mta") }))
        .status,
      403,
    );
    assert.equal((await service.request("GET", "/api/admin/security-events")).status, 401);
  });

  test("a domain admin reads its own domain's events only, through the service and on the page", async () => {
    const { admin, users, domains } = service.services;
    const da = userActor(await users.get("da@example.org"), "192.0.2.7") as Actor;
    const org = await domains.get("example.org");
    const seen = await admin.securityEvents.list(da, {}, { limit: 500, offset: 0 });
    assert.ok(seen.total > 0);
    assert.ok(seen.items.every((e) => e.domainId === org.id));
    assert.equal(
      (await admin.securityEvents.list(da, { email: "carol@example.net" }, { limit: 10, offset: 0 })).total,
      0,
    );
    const all = await admin.securityEvents.list(consoleActor, {}, { limit: 500, offset: 0 });
    assert.ok(all.items.some((e) => e.email === "carol@example.net"));

    const daWeb = new WebClient(service.url);
    await daWeb.signIn("da@example.org");
    const page = await daWeb.get("/admin/security-events");
    assert.equal(page.status, 200);
    assert.ok(page.text.includes("bob@example.org"));
    assert.ok(!page.text.includes("carol@example.net"));
    // Asking for another domain's account does not widen it (the form keeps the address typed).
    const other = await daWeb.get("/admin/security-events?email=carol%40example.net");
    assert.match(other.text, /No events\./);
    assert.ok(!other.text.includes("<td>carol@example.net</td>"));
    const adminWeb = new WebClient(service.url);
    await adminWeb.signIn("admin@example.org");
    const full = await adminWeb.get("/admin/security-events?type=account.deleted");
    assert.equal(full.status, 200);
    assert.ok(full.text.includes("carol@example.net"));
    assert.ok(!full.text.includes("bob@example.org"));
    assert.match(full.text, /<th scope="col">/);
    const bad = await adminWeb.get("/admin/security-events?email=nobody&since=yesterday");
    assert.equal(bad.status, 422);
    assert.equal(fieldError(bad.text, "email"), "This is not an e-mail address.");
    assert.equal(fieldError(bad.text, "since"), "Enter a date as YYYY-MM-DD.");
    const german = await adminWeb.get("/admin/security-events?lang=de");
    assert.equal(german.status, 303);
    assert.match((await adminWeb.get("/admin/security-events")).text, /Sicherheitsereignisse/);
    await adminWeb.get("/admin/security-events?lang=en");
    // Only admins reach the page.
    const plain = new WebClient(service.url);
    await plain.signIn("alice@example.org");
    assert.equal((await plain.get("/admin/security-events")).status, 403);
  });

  test("a user reads their own events on /account/activity, in English and German, and nobody else's", async () => {
    const bob = new WebClient(service.url);
    await bob.signIn("bob@example.org");
    const account = await bob.get("/account");
    assert.match(account.text, /href="\/account\/activity"/);
    await dropSignInEvents();
    const page = await bob.get("/account/activity");
    assert.equal(page.status, 200);
    assert.match(page.text, /<html lang="en"/);
    assert.match(page.text, /Password changed/);
    assert.match(page.text, /Two-factor authentication switched on/);
    // An admin's change says so, without the admin's name or address.
    assert.match(page.text, /Admin API, by an administrator/);
    assert.ok(!page.text.includes("api-token"));
    assert.ok(!page.text.includes("admin@example.org"));
    // Not alice's (her webmail client address), not carol's (her recovery client).
    assert.ok(!page.text.includes("198.51.100.7"));
    assert.ok(!page.text.includes("203.0.113.9"));
    assert.match(page.text, /5 events/);
    assert.equal((await bob.get("/account/activity?lang=de")).status, 303);
    const german = await bob.get("/account/activity");
    assert.match(german.text, /Kontoaktivität/);
    assert.match(german.text, /Passwort geändert/);
    assert.match(german.text, /der letzten 90 Tage/);
    // A signed-out visitor is sent to sign in.
    assert.equal((await new WebClient(service.url).get("/account/activity")).location, "/login");
  });

  test("the daily job prunes events older than the setting; the setting is checked", async () => {
    const { admin, database, securityEvents, settings } = service.services;
    const bob = await service.services.users.get("bob@example.org");
    const now = Math.floor(Date.now() / 1000);
    await database.db.transaction().execute(async (trx) => {
      for (const daysAgo of [31, 29])
        await securityEvents.record(
          trx,
          bob,
          ownerOrigin("web", "192.0.2.99"),
          { type: "recovery.started" },
          now - daysAgo * 86400,
        );
    });
    const refused = await service.request("PATCH", "/api/admin/settings", {
      token,
      json: { security_event_days: 0 },
    });
    assert.equal(refused.status, 422);
    assert.deepEqual(refused.body, { message: "security_event_days: must be at least 1" });
    await settings.update({ security_event_days: 30 });
    const before = (await rows()).length;
    const outcome = await admin.maintenance.run(consoleActor, "prune-sign-in-state", {
      logger: createLogger("silent"),
    });
    assert.match(outcome.result, / and 1 security events older than 30 days$/);
    const left = await rows();
    assert.equal(left.length, before - 1);
    assert.deepEqual(
      left.filter((row) => row.client_address === "192.0.2.99").map((row) => row.occurred_at),
      [now - 29 * 86400],
    );
    assert.equal(await securityEvents.prune(30, now), 0);
    await settings.update({ security_event_days: 90 });
  });

  test("recentFailures counts failed sign-ins per client address, latest first", async () => {
    const { database, securityEvents } = service.services;
    const alice = await service.services.users.get("alice@example.org");
    const now = Math.floor(Date.now() / 1000);
    const failed = { type: "sign_in.failed", detail: { reason: "wrong_password" } } as const;
    await dropSignInEvents();
    await database.db.transaction().execute(async (trx) => {
      await securityEvents.record(trx, alice, ownerOrigin("passdb", "192.0.2.1"), failed, now - 300);
      await securityEvents.record(trx, alice, ownerOrigin("passdb", "192.0.2.1"), failed, now - 200);
      await securityEvents.record(trx, alice, ownerOrigin("web", "192.0.2.2"), failed, now - 100);
      await securityEvents.record(trx, alice, ownerOrigin("web", "192.0.2.3"), failed, now - 2 * 86400);
      // An address nobody holds: stored only as an address, never as typed text.
      await securityEvents.record(
        trx,
        { id: null, email: "hunter2 is my password", domainId: null },
        ownerOrigin("web", "192.0.2.4"),
        failed,
      );
    });
    assert.deepEqual(await securityEvents.recentFailures("Alice@example.org", 5), {
      failures: 3,
      clients: [
        { clientAddress: "192.0.2.2", failures: 1, lastAt: now - 100 },
        { clientAddress: "192.0.2.1", failures: 2, lastAt: now - 200 },
      ],
    });
    assert.equal((await securityEvents.recentFailures("alice@example.org", 1)).clients.length, 1);
    const unknown = await database.db
      .selectFrom("security_events")
      .selectAll()
      .where("client_address", "=", "192.0.2.4")
      .executeTakeFirst();
    assert.equal(unknown?.email, null);
  });

  test("a reset stops what it wipes: a second factor that was on and a recovery in progress", async () => {
    const { admin, database, users } = service.services;
    const email = "alice@example.org";
    const totp = await users.enableTotp(email, {}, ownerOrigin("web", "192.0.2.5"));
    secrets.push(totp.secret, ...totp.backupCodes);
    await database.db
      .updateTable("users")
      .set({ recovery_start_time: Math.floor(Date.now() / 1000) - 3600 })
      .where("email", "=", email)
      .execute();
    const count = (await rows(email)).length;
    await admin.users.reset(consoleActor, email, password);
    assert.deepEqual(
      (await rows(email))
        .slice(count)
        .map((row) => [row.type, row.door, row.actor, JSON.parse(row.detail ?? "null")]),
      [
        ["password.changed", "console", "console", { how: "reset" }],
        ["two_factor.disabled", "console", "console", { how: "reset" }],
        ["recovery.stopped", "console", "console", { how: "reset" }],
        // No sessions.ended: switching the second factor on above ended Alice's page session.
      ],
    );
    const text = JSON.stringify((await rows(email)).map((row) => [row.detail, row.email, row.actor]));
    for (const secret of [totp.secret, ...totp.backupCodes]) assert.ok(!text.includes(secret));
  });
});

describe("security event log: the console", () => {
  let dir: string;
  let databaseUrl: string;
  let drop: () => Promise<void>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "mas-security-events-"));
    ({ url: databaseUrl, drop } = await freshDatabaseUrl(join(dir, "data.sqlite")));
  });
  after(async () => {
    await drop?.();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a password change on the console is written with the door `console`", async () => {
    const ok = (args: string[], input?: string) => {
      const result = runConsole(databaseUrl, args, input);
      assert.equal(result.status, 0, `${args.join(" ")}: ${result.stderr}`);
    };
    ok(["app:domain:create", "example.org"]);
    ok(["app:user:create", "-u", "alice@example.org"], `${password}\n`);
    const newPassword = "a console-made passphrase";
    ok(["app:user:password", "-u", "alice@example.org"], `${password}\n${newPassword}\n`);
    const database = await openDatabase(databaseUrl, { poolSize: 1 });
    try {
      const events = await database.db.selectFrom("security_events").selectAll().execute();
      assert.deepEqual(
        events.map((row) => [row.type, row.door, row.email, row.client_address, row.actor]),
        [["password.changed", "console", "alice@example.org", null, null]],
      );
      assert.ok(!JSON.stringify(events).includes(newPassword));
    } finally {
      await database.close();
    }
  });
});
