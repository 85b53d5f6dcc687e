import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type Actor, consoleActor, userActor } from "../src/accounts/admin-scope.ts";
import { withoutSecrets } from "../src/accounts/audit-log.ts";
import { openDatabase } from "../src/db/database.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";
import { password } from "./helpers/fixtures.ts";
import { runConsole } from "./helpers/process.ts";
import { startService, type TestService } from "./helpers/service.ts";

/**
 * The audit log: every change through the admin API (actor `api-token:<name>`), the admin
 * services (a person's address) and the console (`console`) is written with who, what, when, from
 * where and the changed fields, never a secret; the admin API lists it with filters and paging; a
 * domain admin reads its own domain's entries only. On every database (TEST_DATABASE_URL).
 */
describe("audit log of admin actions", () => {
  let service: TestService;
  let token: string;
  const secrets: string[] = [password, "a brand new password 42", "webhook-secret-0123456789"];

  before(async () => {
    service = await startService();
    token = await service.token("admin");
  });
  after(async () => {
    await service?.close();
  });

  const api = async (method: string, path: string, json?: unknown) => {
    const answer = await service.request(method, path, { token, ...(json === undefined ? {} : { json }) });
    assert.ok(answer.status < 300, `${method} ${path}: ${answer.status} ${answer.text}`);
    return answer.body;
  };
  const log = async (query = "") => {
    const answer = await service.request("GET", `/api/admin/audit-log${query}`, { token });
    assert.equal(answer.status, 200, answer.text);
    return answer.body as { items: Record<string, any>[]; total: number };
  };

  test("admin API changes are recorded with the token, the client address and the changed fields, never a secret", async () => {
    const started = Math.floor(Date.now() / 1000);
    await api("POST", "/api/admin/domains", { name: "example.org" });
    await api("POST", "/api/admin/domains", { name: "example.net" });
    const created = await api("POST", "/api/admin/users", {
      email: "bob@example.org",
      password,
      quota: 1024,
      mailCrypt: true,
    });
    if (created.recoveryToken) secrets.push(created.recoveryToken);
    await api("PATCH", "/api/admin/users/bob@example.org", { quota: 2048, roles: ["ROLE_PERMANENT"] });
    const reset = await api("POST", "/api/admin/users/bob@example.org/reset", {
      password: "a brand new password 42",
    });
    if (reset.recoveryToken) secrets.push(reset.recoveryToken);
    await api("POST", "/api/admin/aliases", { source: "team@example.org", owner: "bob@example.org" });
    await api("PATCH", "/api/admin/settings", { app_name: "Audit Mail" });
    const newToken = await api("POST", "/api/admin/api-tokens", { name: "janitor", scopes: ["retention"] });
    secrets.push(newToken.token);
    const hook = await api("POST", "/api/admin/webhooks", {
      url: "https://hooks.example.net/x",
      events: ["user.deleted"],
      secret: "webhook-secret-0123456789",
    });
    await api("PATCH", `/api/admin/webhooks/${hook.id}`, { secret: "another-secret-0123456789" });
    secrets.push("another-secret-0123456789");
    const totp = await api("PUT", "/api/admin/users/bob@example.org/totp", {});
    secrets.push(totp.secret, ...totp.backupCodes);
    await api("DELETE", "/api/admin/users/bob@example.org/totp");
    await api("DELETE", "/api/admin/users/bob@example.org");

    const { items, total } = await log("?limit=100");
    assert.equal(total, items.length);
    const actions = items.map((e) => e.action).reverse();
    assert.deepEqual(actions, [
      "domain.create",
      "domain.create",
      "user.create",
      "user.update",
      "user.reset",
      "alias.create",
      "settings.update",
      "api-token.create",
      "webhook.create",
      "webhook.update",
      "user.totp.enable",
      "user.totp.disable",
      "user.delete",
    ]);
    for (const entry of items) {
      assert.equal(entry.actor, "api-token:test token");
      assert.equal(entry.clientAddress, "127.0.0.1");
      assert.ok(entry.at >= started && entry.at <= Math.floor(Date.now() / 1000) + 1);
    }
    const update = items.find((e) => e.action === "user.update");
    assert.deepEqual(update?.detail, {
      roles: { from: ["ROLE_USER"], to: ["ROLE_USER", "ROLE_PERMANENT"] },
      quota: { from: 1024, to: 2048 },
    });
    assert.equal(update?.target, "bob@example.org");
    assert.equal(update?.domain, "example.org");
    assert.deepEqual(items.find((e) => e.action === "settings.update")?.detail, {
      app_name: { from: "Userli", to: "Audit Mail" },
    });
    assert.deepEqual(items.find((e) => e.action === "webhook.update")?.detail, { secretChanged: true });
    // No password, recovery token, API token, webhook secret, TOTP secret or backup code anywhere.
    const text = JSON.stringify(items);
    for (const secret of secrets) assert.ok(!text.includes(secret), `the log holds a secret: ${secret}`);
    // Rows as stored, not only as listed.
    const rows = await service.services.database.db.selectFrom("audit_log").select("detail").execute();
    for (const secret of secrets)
      assert.ok(!rows.some((row) => row.detail?.includes(secret)), `a stored detail holds ${secret}`);
  });

  test("the list filters by action, actor, target, domain and time, and pages", async () => {
    const created = await log("?action=user.create");
    assert.deepEqual(
      created.items.map((e) => e.target),
      ["bob@example.org"],
    );
    assert.equal((await log("?actor=console")).total, 0);
    assert.ok((await log("?actor=api-token%3Atest%20token")).total >= 13);
    assert.deepEqual(
      [...new Set((await log("?target=team")).items.map((e) => e.target))],
      ["team@example.org"],
    );
    const byDomain = await log("?domain=example.org&limit=100");
    assert.ok(byDomain.items.every((e) => e.domain === "example.org"));
    assert.ok(byDomain.items.some((e) => e.action === "alias.create"));
    assert.equal((await log("?domain=nowhere.example")).total, 0);
    const future = Math.floor(Date.now() / 1000) + 3600;
    assert.equal((await log(`?since=${future}`)).total, 0);
    assert.equal((await log(`?until=${future}`)).total, (await log()).total);
    const first = await log("?limit=2");
    const second = await log("?limit=2&offset=2");
    assert.equal(first.items.length, 2);
    assert.notEqual(first.items[0]?.id, second.items[0]?.id);
    assert.ok(first.items[1]?.id > second.items[0]?.id, "newest first");
    for (const [query, message] of [
      ["?action=user.exploded", "action: unknown action user.exploded"],
      ["?since=yesterday", "since: must be a whole number"],
      ["?limit=501", "limit: at most 500"],
    ])
      assert.deepEqual((await service.request("GET", `/api/admin/audit-log${query}`, { token })).body, {
        message,
      });
    const scoped = await service.token("mta");
    assert.equal((await service.request("GET", "/api/admin/audit-log", { token: scoped })).status, 403);
    assert.equal((await service.request("GET", "/api/admin/audit-log")).status, 401);
  });

  test("a domain admin reads only its own domain's entries; a person's actions name its address", async () => {
    const { admin, users, domains } = service.services;
    await users.create({ email: "carol@example.net", password, roles: ["ROLE_DOMAIN_ADMIN"] });
    await users.create({ email: "dave@example.net", password });
    const carol = userActor(await users.get("carol@example.net"), "192.0.2.7") as Actor;
    assert.equal(carol.reach, "domain");
    await admin.users.update(carol, "dave@example.net", { quota: 5 });
    const net = await domains.get("example.net");
    const seen = await admin.auditLog.list(carol, {}, { limit: 100, offset: 0 });
    assert.ok(seen.total >= 2);
    assert.ok(seen.items.every((e) => e.targetDomainId === net.id));
    // Asking for another domain does not widen it.
    const org = await domains.get("example.org");
    assert.equal((await admin.auditLog.list(carol, { domainId: org.id }, { limit: 10, offset: 0 })).total, 0);
    const own = seen.items.find((e) => e.action === "user.update");
    assert.equal(own?.actor, "carol@example.net");
    assert.equal(own?.actorDomainId, net.id);
    assert.equal(own?.clientAddress, "192.0.2.7");
  });

  test("the net under the callers: secret fields are dropped at any depth, flags stay", () => {
    assert.deepEqual(
      withoutSecrets({
        password: "x",
        newPassword: "x",
        recoveryToken: "x",
        passwordChangeRequired: true,
        nested: { secret: "x", plainToken: "x", backupCodes: ["1"], keyId: "ABCD", key: "x" },
        list: [{ totpSecret: "x", url: "https://x" }],
      }),
      { passwordChangeRequired: true, nested: { keyId: "ABCD" }, list: [{ url: "https://x" }] },
    );
  });
});

describe("audit log: the console records as `console`", () => {
  let dir: string;
  let databaseUrl: string;
  let drop: () => Promise<void>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "mas-audit-console-"));
    ({ url: databaseUrl, drop } = await freshDatabaseUrl(join(dir, "data.sqlite")));
  });
  after(async () => {
    await drop?.();
    rmSync(dir, { recursive: true, force: true });
  });

  test("domain, user, setting and job runs from the console are in the log", async () => {
    const ok = (args: string[], input?: string) => {
      const result = runConsole(databaseUrl, args, input);
      assert.equal(result.status, 0, `${args.join(" ")}: ${result.stderr}`);
    };
    ok(["app:domain:create", "example.org"]);
    ok(["app:user:create", "-u", "alice@example.org"], `${password}\n`);
    ok(["app:setting:set", "app_name", "Console Mail"]);
    ok(["app:jobs:run", "remove-inactive-users", "--dry-run"]);
    const database = await openDatabase(databaseUrl, { poolSize: 1 });
    try {
      const rows = await database.db.selectFrom("audit_log").selectAll().orderBy("id").execute();
      assert.deepEqual(
        rows.map((row) => [row.actor, row.action, row.target, row.client_address]),
        [
          ["console", "domain.create", "example.org", null],
          ["console", "user.create", "alice@example.org", null],
          ["console", "settings.update", "settings", null],
          ["console", "job.run", "remove-inactive-users", null],
        ],
      );
      assert.ok(!rows.some((row) => row.detail?.includes(password)));
    } finally {
      await database.close();
    }
    assert.equal(consoleActor.name, "console");
  });
});
