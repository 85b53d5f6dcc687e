import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startService, type TestService } from "./helpers/service.ts";

const password = "correct horse battery staple";

describe("API tokens, routing and bad input", () => {
  let service: TestService;
  let mta: string;
  let retention: string;

  before(async () => {
    service = await startService();
    mta = await service.token("mta");
    retention = await service.token("retention");
    await service.services.domains.create("example.org");
    await service.services.users.create({ email: "user@example.org", password, mailCrypt: false });
  });
  after(() => service.close());

  test("401 without a token, 401 with an unknown one, 403 without the scope", async () => {
    const none = await service.request("GET", "/api/mta/domain/example.org");
    assert.equal(none.status, 401);
    assert.equal(none.body.message, "No API token provided");
    assert.equal(none.body.error, "No API token provided");
    const unknown = await service.request("GET", "/api/mta/domain/example.org", { token: "a".repeat(64) });
    assert.equal(unknown.status, 401);
    assert.equal(unknown.body.message, "Invalid API token");
    const garbage = await service.request("GET", "/api/mta/domain/example.org", { token: "not-a-token" });
    assert.equal(garbage.status, 401);
    const scope = await service.request("GET", "/api/mta/domain/example.org", { token: retention });
    assert.equal(scope.status, 403);
    assert.deepEqual(scope.body, { message: "Token does not have required scope: mta" });
  });

  test("a token deleted after use is refused at once, in either letter case", async () => {
    const { plainToken, token } = await service.services.tokens.create("short-lived", ["mta"]);
    const ask = (plain: string) => service.request("GET", "/api/mta/domain/example.org", { token: plain });
    assert.equal((await ask(plainToken)).status, 200);
    assert.equal((await ask(plainToken.toUpperCase())).status, 200);
    await service.services.tokens.delete(token.id);
    for (const plain of [plainToken, plainToken.toUpperCase()]) {
      const refused = await ask(plain);
      assert.equal(refused.status, 401);
      assert.equal(refused.body.message, "Invalid API token");
    }
  });

  test("every group checks its own scope", async () => {
    const paths: [string, string][] = [
      ["GET", "/api/mailbox-server/status"],
      ["GET", "/api/webmail/aliases"],
      ["GET", "/api/identity/example.org/count"],
      ["GET", "/api/retention/users"],
    ];
    for (const [method, path] of paths.slice(0, 1).concat(paths.slice(2))) {
      const res = await service.request(method, path, { token: mta });
      assert.equal(res.status, 403, path);
    }
    const unauthenticatedBody = await service.request("POST", "/api/mta/auth", {
      json: { email: "user@example.org", password },
    });
    assert.equal(unauthenticatedBody.status, 401, "the token is checked before the body");
  });

  test("X-API-Token works, and Bearer wins when both are given", async () => {
    const header = await service.request("GET", "/api/mta/domain/example.org", {
      headers: { "x-api-token": mta },
    });
    assert.equal(header.status, 200);
    const both = await service.request("GET", "/api/mta/domain/example.org", {
      token: retention,
      headers: { "x-api-token": mta },
    });
    assert.equal(both.status, 403);
    const lower = await service.request("GET", "/api/mta/domain/example.org", {
      headers: { authorization: `bearer ${mta}` },
    });
    assert.equal(lower.status, 200);
  });

  test("last use is recorded, at most once per five minutes", async () => {
    const { db } = service.services.database;
    const token = await service.token("mta");
    const row = () =>
      db
        .selectFrom("api_tokens")
        .select(["id", "last_used_at"])
        .orderBy("id", "desc")
        .executeTakeFirstOrThrow();
    assert.equal((await row()).last_used_at, null);
    await service.request("GET", "/api/mta/domain/example.org", { token });
    const first = (await row()).last_used_at;
    assert.ok(first !== null);
    await db
      .updateTable("api_tokens")
      .set({ last_used_at: (first ?? 0) - 60 })
      .where("id", "=", (await row()).id)
      .execute();
    await service.request("GET", "/api/mta/domain/example.org", { token });
    assert.equal((await row()).last_used_at, (first ?? 0) - 60, "no write within five minutes");
    await db
      .updateTable("api_tokens")
      .set({ last_used_at: (first ?? 0) - 301 })
      .where("id", "=", (await row()).id)
      .execute();
    await service.request("GET", "/api/mta/domain/example.org", { token });
    assert.ok(((await row()).last_used_at ?? 0) >= (first ?? 0));
  });

  test("unknown routes are 404 and wrong methods 405, as JSON, before authentication", async () => {
    const unknown = await service.request("GET", "/api/nothing/here");
    assert.equal(unknown.status, 404);
    assert.equal(typeof unknown.body.message, "string");
    const method = await service.request("DELETE", "/api/mta/domain/example.org");
    assert.equal(method.status, 405);
    assert.equal(method.headers.get("allow")?.includes("GET"), true);
    assert.equal(typeof method.body.message, "string");
    const put = await service.request("PUT", "/api/mta/auth", { json: {} });
    assert.equal(put.status, 405);
  });

  test("odd addresses in paths get a 4xx JSON answer, never a 500", async () => {
    const odd = [
      "*",
      "%00",
      "a%00b@example.org",
      `${"a".repeat(300)}@example.org`,
      "%F0%9F%92%A9",
      "%E2%82%AC@example.org",
      "@",
      "a@b@c",
      "%2e%2e%2f",
    ];
    const prefixes = [
      "/api/mta/mailbox/",
      "/api/mta/alias/",
      "/api/mta/senders/",
      "/api/mta/smtp_quota/",
      "/api/mta/domain/",
    ];
    for (const prefix of prefixes) {
      for (const value of odd) {
        const res = await service.request("GET", prefix + value, { token: mta });
        assert.ok(res.status >= 200 && res.status < 500, `${prefix}${value} gave ${res.status}`);
        if (res.status >= 400) assert.equal(typeof res.body?.message, "string", `${prefix}${value}`);
        assert.doesNotMatch(res.text, /\.ts:\d+/);
      }
    }
    const bad = await service.request("GET", "/api/mta/mailbox/*", { token: mta });
    assert.equal(bad.status, 400);
    const unicode = await service.request(
      "GET",
      "/api/mta/mailbox/%C3%BC%40example.org".replace("%40", "@"),
      { token: mta },
    );
    assert.equal(unicode.status, 200);
    assert.equal(unicode.body, false);
  });

  test("malformed bodies: 400 broken JSON or form, 415 unknown type, 413 too large, 422 wrong shape", async () => {
    const broken = await service.request("POST", "/api/mta/auth", {
      token: mta,
      headers: { "content-type": "application/json" },
      body: '{"email":',
    });
    assert.equal(broken.status, 400);
    assert.equal(broken.body.message, 'Request payload contains invalid "json" data.');
    const empty = await service.request("POST", "/api/mta/auth", {
      token: mta,
      headers: { "content-type": "application/json" },
      body: "",
    });
    assert.equal(empty.status, 422);
    assert.equal(typeof empty.body.message, "string");
    const poisoned = await service.request("POST", "/api/mta/auth", {
      token: mta,
      headers: { "content-type": "application/json" },
      body: '{"email":"a@example.org","password":"x","__proto__":{"admin":true}}',
    });
    assert.equal(poisoned.status, 400);
    const xml = await service.request("POST", "/api/mta/auth", {
      token: mta,
      headers: { "content-type": "application/xml" },
      body: "<a/>",
    });
    assert.equal(xml.status, 415);
    const large = await service.request("POST", "/api/mta/auth", {
      token: mta,
      json: { email: "user@example.org", password: "x".repeat(70 * 1024) },
    });
    assert.equal(large.status, 413);
    assert.equal(typeof large.body.message, "string");
    for (const json of [[], "string", 42, null, { email: ["a"], password }]) {
      const res = await service.request("POST", "/api/mta/auth", { token: mta, json });
      assert.equal(res.status, 422, JSON.stringify(json));
      assert.equal(typeof res.body.message, "string");
    }
  });

  test("a failed request writes nothing", async () => {
    const { db } = service.services.database;
    const before = await db.selectFrom("users").select(["email", "last_login_time", "password"]).execute();
    await service.request("PUT", "/api/retention/user@example.org/touch", {
      token: retention,
      json: { timestamp: Math.floor(Date.now() / 1000) + 99999 },
    });
    await service.request("POST", "/api/mta/auth", {
      token: mta,
      json: { email: "user@example.org", password: "wrong password!!" },
    });
    await service.request("POST", "/api/mta/auth", {
      token: mta,
      headers: { "content-type": "application/json" },
      body: "{",
    });
    assert.deepEqual(
      await db.selectFrom("users").select(["email", "last_login_time", "password"]).execute(),
      before,
    );
  });
});
