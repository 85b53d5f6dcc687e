import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { byTest, password } from "./helpers/fixtures.ts";
import { startService, type TestResponse, type TestService } from "./helpers/service.ts";

/** API answers carrying a secret are never kept by a cache: `Cache-Control: no-store`. */
describe("answers carrying a secret send Cache-Control: no-store", () => {
  let service: TestService;
  let admin: string;
  let dovecot: string;

  before(async () => {
    service = await startService();
    admin = await service.token("admin");
    dovecot = await service.token("mailbox-server");
    await service.services.domains.create("example.org");
    await service.services.users.create({ email: "keys@example.org", password, mailCrypt: true });
    await service.services.users.create({ email: "gone@example.org", password, mailCrypt: false });
    await service.services.lifecycle.delete("gone@example.org", byTest);
  });
  after(() => service.close());

  const noStore = (answer: TestResponse, what: string) => {
    assert.ok(answer.status >= 200 && answer.status < 300, `${what}: ${answer.status} ${answer.text}`);
    assert.equal(answer.headers.get("cache-control"), "no-store", what);
  };
  const call = (method: string, path: string, json?: unknown, token = admin) =>
    service.request(method, path, { token, ...(json === undefined ? {} : { json }) });

  test("API token creation", async () => {
    const answer = await call("POST", "/api/admin/api-tokens", { name: "cache", scopes: ["mta"] });
    assert.ok(answer.body.token);
    noStore(answer, "POST /api/admin/api-tokens");
  });

  test("user creation with its recovery token, reset, restore and import", async () => {
    const created = await call("POST", "/api/admin/users", {
      email: "new@example.org",
      password,
      mailCrypt: true,
    });
    assert.ok(created.body.recoveryToken);
    noStore(created, "POST /api/admin/users");
    noStore(
      await call("POST", "/api/admin/users/new@example.org/reset", { password: "a brand new password 42" }),
      "reset",
    );
    noStore(
      await call("POST", "/api/admin/users/gone@example.org/restore", {
        password: "a brand new password 42",
      }),
      "restore",
    );
    noStore(
      await call("POST", "/api/admin/users/import", { users: [{ email: "imported@example.org" }] }),
      "import",
    );
  });

  test("TOTP secret and backup codes", async () => {
    const answer = await call("PUT", "/api/admin/users/new@example.org/totp", {});
    assert.ok(answer.body.secret);
    noStore(answer, "PUT /api/admin/users/{email}/totp");
  });

  test("webhook secret", async () => {
    const answer = await call("POST", "/api/admin/webhooks", {
      url: "http://127.0.0.1:1/hook",
      events: ["user.deleted"],
    });
    assert.ok(answer.body.secret);
    noStore(answer, "POST /api/admin/webhooks");
  });

  test("passdb's answer with the MailCrypt private key", async () => {
    const answer = await call("POST", "/api/mailbox-server/keys@example.org", { password }, dovecot);
    assert.ok(answer.body.body.mailCryptPrivateKey);
    noStore(answer, "passdb");
  });

  test("answers without a secret are not marked", async () => {
    const list = await call("GET", "/api/admin/users");
    assert.equal(list.status, 200);
    assert.equal(list.headers.get("cache-control"), null);
  });
});
