import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { markDeleted, password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

describe("mailbox-server (Dovecot userdb and passdb)", () => {
  let service: TestService;
  let token: string;

  before(async () => {
    service = await startService();
    token = await service.token("mailbox-server");
    const { domains, users } = service.services;
    await domains.create("example.org");
    await users.create({ email: "alice@example.org", password, quota: 1024 });
    await users.create({ email: "plain@example.org", password, mailCrypt: false });
    await users.create({ email: "spam@example.org", password, roles: ["ROLE_SPAM"] });
    await users.create({ email: "change@example.org", password, passwordChangeRequired: true });
    await users.create({ email: "gone@example.org", password });
    await markDeleted(service.services.database.db, "gone@example.org");
  });
  after(() => service.close());

  test("status answers success", async () => {
    const res = await service.request("GET", "/api/mailbox-server/status", { token });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { message: "success" });
  });

  test("userdb returns every field, mailCrypt as a number", async () => {
    const res = await service.request("GET", "/api/mailbox-server/Alice@Example.org", { token });
    assert.equal(res.status, 200);
    assert.equal(res.body.message, "success");
    assert.deepEqual(Object.keys(res.body.body).sort(), ["mailCrypt", "mailCryptPublicKey", "quota", "user"]);
    assert.equal(res.body.body.user, "alice@example.org");
    assert.equal(res.body.body.mailCrypt, 2);
    assert.equal(res.body.body.quota, "1024M");
    assert.match(
      Buffer.from(res.body.body.mailCryptPublicKey, "base64").toString(),
      /^-----BEGIN PUBLIC KEY-----\n/,
    );
  });

  test("userdb of a user without MailCrypt has empty strings", async () => {
    const res = await service.request("GET", "/api/mailbox-server/plain@example.org", { token });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.body, {
      user: "plain@example.org",
      mailCrypt: 0,
      mailCryptPublicKey: "",
      quota: "",
    });
  });

  test("userdb does not block spam users but hides unknown and deleted ones", async () => {
    assert.equal(
      (await service.request("GET", "/api/mailbox-server/spam@example.org", { token })).status,
      200,
    );
    for (const email of ["nobody@example.org", "gone@example.org"]) {
      const res = await service.request("GET", `/api/mailbox-server/${email}`, { token });
      assert.equal(res.status, 404);
      assert.deepEqual(res.body, { message: "user not found" });
    }
  });

  test("passdb returns a private key that openssl accepts and that matches the userdb public key", async () => {
    const res = await service.request("POST", "/api/mailbox-server/alice@example.org", {
      token,
      json: { password },
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.message, "success");
    assert.deepEqual(Object.keys(res.body.body).sort(), [
      "mailCrypt",
      "mailCryptPrivateKey",
      "mailCryptPublicKey",
    ]);
    assert.equal(res.body.body.mailCrypt, 2);
    const privatePem = Buffer.from(res.body.body.mailCryptPrivateKey, "base64").toString();
    const derivedPublic = execFileSync("openssl", ["pkey", "-pubout"], { input: privatePem }).toString();
    const userdb = await service.request("GET", "/api/mailbox-server/alice@example.org", { token });
    assert.equal(derivedPublic, Buffer.from(userdb.body.body.mailCryptPublicKey, "base64").toString());
    assert.equal(res.body.body.mailCryptPublicKey, userdb.body.body.mailCryptPublicKey);
  });

  test("passdb accepts form-encoded bodies", async () => {
    const res = await service.request("POST", "/api/mailbox-server/plain@example.org", {
      token,
      form: { password },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.body, { mailCrypt: 0, mailCryptPrivateKey: "", mailCryptPublicKey: "" });
  });

  test("passdb status codes: 401 wrong password, 403 spam / password change, 404 unknown / deleted", async () => {
    const cases: [string, string, number, string][] = [
      ["alice@example.org", "wrong password here", 401, "authentication failed"],
      ["spam@example.org", password, 403, "user disabled due to spam role"],
      ["change@example.org", password, 403, "user password change required"],
      ["nobody@example.org", password, 404, "user not found"],
      ["gone@example.org", password, 404, "user not found"],
    ];
    for (const [email, pw, status, message] of cases) {
      const res = await service.request("POST", `/api/mailbox-server/${email}`, {
        token,
        json: { password: pw },
      });
      assert.equal(res.status, status, email);
      assert.deepEqual(res.body, { message }, email);
    }
  });

  test("passdb does not reveal account state to a wrong password", async () => {
    const res = await service.request("POST", "/api/mailbox-server/spam@example.org", {
      token,
      json: { password: "not the password" },
    });
    assert.equal(res.status, 401);
  });

  test("passdb answers 500 when the key cannot be decrypted", async () => {
    const { db } = service.services.database;
    const alice = await db
      .selectFrom("users")
      .select("mail_crypt_secret_box")
      .where("email", "=", "alice@example.org")
      .executeTakeFirstOrThrow();
    const box = Buffer.from(alice.mail_crypt_secret_box ?? "", "base64");
    box[box.length - 1] = (box[box.length - 1] ?? 0) ^ 1;
    await db
      .updateTable("users")
      .set({ mail_crypt_secret_box: box.toString("base64") })
      .where("email", "=", "alice@example.org")
      .execute();
    try {
      const res = await service.request("POST", "/api/mailbox-server/alice@example.org", {
        token,
        json: { password },
      });
      assert.equal(res.status, 500);
      assert.equal(res.body.message, "decryption of mailCryptSecretBox failed");
      assert.doesNotMatch(res.text, /at .*\.ts/);
    } finally {
      await db
        .updateTable("users")
        .set({ mail_crypt_secret_box: alice.mail_crypt_secret_box })
        .where("email", "=", "alice@example.org")
        .execute();
    }
  });

  test("a successful sign-in records the day of the last login once", async () => {
    const { db } = service.services.database;
    await db
      .updateTable("users")
      .set({ last_login_time: null })
      .where("email", "=", "plain@example.org")
      .execute();
    await service.request("POST", "/api/mailbox-server/plain@example.org", { token, json: { password } });
    const row = await db
      .selectFrom("users")
      .select("last_login_time")
      .where("email", "=", "plain@example.org")
      .executeTakeFirstOrThrow();
    const today = Math.floor(Date.now() / 1000 / 86400) * 86400;
    assert.equal(row.last_login_time, today);
  });

  test("MailCrypt level 0 reports no encryption at all", async () => {
    await service.services.settings.update({ mail_crypt: 0 });
    try {
      const userdb = await service.request("GET", "/api/mailbox-server/alice@example.org", { token });
      assert.equal(userdb.body.body.mailCrypt, 0);
      const passdb = await service.request("POST", "/api/mailbox-server/alice@example.org", {
        token,
        json: { password },
      });
      assert.equal(passdb.body.body.mailCrypt, 0);
      assert.equal(passdb.body.body.mailCryptPrivateKey, "");
    } finally {
      await service.services.settings.update({ mail_crypt: 2 });
    }
  });
});
