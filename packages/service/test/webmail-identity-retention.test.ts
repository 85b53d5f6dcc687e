import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { generateBackupCodes, hashBackupCode } from "../src/credentials/backup-codes.ts";
import { currentTotpCode, generateTotpSecret } from "../src/credentials/totp.ts";
import { markDeleted, password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

describe("webmail, identity and retention", () => {
  let service: TestService;
  let webmail: string;
  let identity: string;
  let retention: string;
  const totpSecret = generateTotpSecret();
  const backupCodes = generateBackupCodes();

  before(async () => {
    service = await startService();
    [webmail, identity, retention] = await Promise.all([
      service.token("webmail"),
      service.token("identity"),
      service.token("retention"),
    ]);
    const { domains, users, aliases, database } = service.services;
    await domains.create("example.org");
    await domains.create("example.com");
    for (const local of ["alice", "bob", "carol_x", "dave"]) {
      await users.create({ email: `${local}@example.org`, password, mailCrypt: false });
    }
    // An address only older versions created (new ones are refused): it must still be found.
    await database.db
      .updateTable("users")
      .set({ email: "dave%@example.org" })
      .where("email", "=", "dave@example.org")
      .execute();
    await users.create({ email: "erin@example.com", password, mailCrypt: false });
    await users.create({ email: "spam@example.org", password, mailCrypt: false, roles: ["ROLE_SPAM"] });
    await users.create({
      email: "change@example.org",
      password,
      mailCrypt: false,
      passwordChangeRequired: true,
    });
    await users.create({ email: "gone@example.org", password, mailCrypt: false });
    await markDeleted(database.db, "gone@example.org");
    await aliases.create({ source: "a1@example.org", owner: "alice@example.org" });
    await aliases.create({ source: "a2@example.com", owner: "alice@example.org" });
    await aliases.create({ source: "a3@example.org", owner: "alice@example.org" });
    await database.db
      .updateTable("aliases")
      .set({ deleted: 1 })
      .where("source", "=", "a3@example.org")
      .execute();
    const key = service.services.users.backupCodeKey({ email: "bob@example.org" });
    const hashed = backupCodes.map((code: string) => hashBackupCode(code, key));
    await database.db
      .updateTable("users")
      .set({ totp_secret: totpSecret, totp_confirmed: 1, totp_backup_codes: JSON.stringify(hashed) })
      .where("email", "=", "bob@example.org")
      .execute();
  });
  after(() => service.close());

  describe("webmail aliases", () => {
    test("lists active owned aliases across domains after a password check", async () => {
      const res = await service.request("POST", "/api/webmail/aliases", {
        token: webmail,
        json: { email: "alice@example.org", password },
      });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, ["a1@example.org", "a2@example.com"]);
      const none = await service.request("POST", "/api/webmail/aliases", {
        token: webmail,
        form: { email: "bob@example.org", password },
      });
      assert.deepEqual(none.body, []);
    });

    test("401 on wrong credentials or unknown user, 400 on a broken form body", async () => {
      for (const [email, pw] of [
        ["alice@example.org", "wrong password!!"],
        ["nobody@example.org", password],
      ]) {
        const res = await service.request("POST", "/api/webmail/aliases", {
          token: webmail,
          json: { email, password: pw },
        });
        assert.equal(res.status, 401);
        assert.deepEqual(res.body, { message: "Bad credentials" });
      }
      const broken = await service.request("POST", "/api/webmail/aliases", {
        token: webmail,
        headers: { "content-type": "application/json" },
        body: "{not json",
      });
      assert.equal(broken.status, 400);
    });
  });

  describe("identity", () => {
    const get = (path: string) => service.request("GET", path, { token: identity });

    test("search finds active users of the domain, with paging", async () => {
      const all = await get("/api/identity/example.org?search=&max=10&first=0");
      assert.equal(all.status, 200);
      assert.deepEqual(
        all.body.map((u: { email: string }) => u.email),
        [
          "alice@example.org",
          "bob@example.org",
          "carol_x@example.org",
          "change@example.org",
          "dave%@example.org",
          "spam@example.org",
        ],
      );
      assert.deepEqual((await get("/api/identity/example.org?search=ali")).body, [
        { id: "alice", email: "alice@example.org" },
      ]);
      assert.deepEqual((await get("/api/identity/example.org?search=%25")).body, [
        { id: "dave%", email: "dave%@example.org" },
      ]);
      assert.deepEqual((await get("/api/identity/example.org?search=_")).body.length, 1);
      assert.deepEqual(
        (await get("/api/identity/example.org?max=2&first=1")).body.map((u: { id: string }) => u.id),
        ["bob", "carol_x"],
      );
      assert.equal((await get("/api/identity/example.org?max=abc")).status, 400);
      assert.equal((await get("/api/identity/unknown.org")).status, 404);
    });

    test("count counts active users of the domain", async () => {
      const res = await get("/api/identity/example.org/count");
      assert.equal(res.status, 200);
      assert.equal(res.body, 6);
      assert.equal((await get("/api/identity/example.com/count")).body, 1);
    });

    test("single user, by address or local part; 404 for other domains and deleted users", async () => {
      assert.deepEqual((await get("/api/identity/example.org/user/alice@example.org")).body, {
        id: "alice",
        email: "alice@example.org",
      });
      assert.deepEqual((await get("/api/identity/example.org/user/alice")).body, {
        id: "alice",
        email: "alice@example.org",
      });
      for (const path of [
        "/api/identity/example.org/user/erin@example.com",
        "/api/identity/example.org/user/gone",
        "/api/identity/example.org/user/nobody",
      ]) {
        const res = await get(path);
        assert.equal(res.status, 404, path);
        assert.deepEqual(res.body, { message: "user not found" });
      }
    });

    test("validate password", async () => {
      const validate = (email: string, body: Record<string, string>) =>
        service.request("POST", `/api/identity/example.org/validate/${email}`, {
          token: identity,
          json: body,
        });
      assert.deepEqual((await validate("alice@example.org", { credentialType: "password", password })).body, {
        message: "success",
      });
      assert.deepEqual((await validate("alice@example.org", { password })).body, { message: "success" });
      const wrong = await validate("alice@example.org", {
        credentialType: "password",
        password: "wrong password!!",
      });
      assert.equal(wrong.status, 403);
      assert.deepEqual(wrong.body, { message: "authentication failed" });
      for (const email of [
        "nobody@example.org",
        "gone@example.org",
        "spam@example.org",
        "erin@example.com",
      ]) {
        const res = await validate(email, { credentialType: "password", password });
        assert.equal(res.status, 403, email);
        assert.deepEqual(res.body, { message: "authentication failed" });
      }
      const change = await validate("change@example.org", { credentialType: "password", password });
      assert.equal(change.status, 403);
      assert.deepEqual(change.body, { message: "password change required" });
      const other = await validate("alice@example.org", { credentialType: "kerberos", password });
      assert.equal(other.status, 400);
      assert.deepEqual(other.body, { message: "not supported" });
    });

    test("validate otp: a current code once, backup codes once each", async () => {
      const validate = (email: string, code: string) =>
        service.request("POST", `/api/identity/example.org/validate/${email}`, {
          token: identity,
          form: { credentialType: "otp", password: code },
        });
      const code = currentTotpCode(totpSecret, Date.now());
      assert.equal((await validate("bob@example.org", code)).status, 200);
      const replay = await validate("bob@example.org", code);
      assert.equal(replay.status, 403, "a TOTP code is accepted only once");
      assert.equal((await validate("bob@example.org", "000000")).status, 403);
      const backup = backupCodes[2] ?? "";
      assert.equal((await validate("bob@example.org", backup)).status, 200);
      assert.equal((await validate("bob@example.org", backup)).status, 403, "a backup code is consumed");
      const notEnabled = await validate("alice@example.org", code);
      assert.equal(notEnabled.status, 403);
      assert.deepEqual(notEnabled.body, { message: "not supported" });
    });

    test("validate otp: a request refused for a required password change does not use up the code", async () => {
      const { users, database } = service.services;
      await users.create({
        email: "otpchange@example.org",
        password,
        mailCrypt: false,
        passwordChangeRequired: true,
      });
      const secret = generateTotpSecret();
      const codes = generateBackupCodes();
      await database.db
        .updateTable("users")
        .set({
          totp_secret: secret,
          totp_confirmed: 1,
          totp_backup_codes: JSON.stringify(
            codes.map((c) =>
              hashBackupCode(c, service.services.users.backupCodeKey({ email: "otpchange@example.org" })),
            ),
          ),
        })
        .where("email", "=", "otpchange@example.org")
        .execute();
      const validate = (code: string) =>
        service.request("POST", "/api/identity/example.org/validate/otpchange@example.org", {
          token: identity,
          json: { credentialType: "otp", password: code },
        });
      const code = currentTotpCode(secret, Date.now());
      const backup = codes[0] ?? "";
      for (const attempt of [code, code, backup, backup]) {
        const res = await validate(attempt);
        assert.equal(res.status, 403);
        assert.deepEqual(res.body, { message: "password change required" }, "the code still matches");
      }
      const wrong = await validate("000000");
      assert.deepEqual(wrong.body, { message: "authentication failed" }, "a wrong code reveals nothing");
      await users.update("otpchange@example.org", { passwordChangeRequired: false });
      assert.equal((await validate(code)).status, 200, "the TOTP code was not used up by the refusals");
      assert.equal((await validate(code)).status, 403, "now it is");
      assert.equal((await validate(backup)).status, 200, "the backup code was not used up either");
      assert.deepEqual((await validate(backup)).body, { message: "authentication failed" });
    });

    test("configured", async () => {
      const get2 = (type: string, email: string) =>
        get(`/api/identity/example.org/configured/${type}/${email}`);
      assert.deepEqual((await get2("password", "alice@example.org")).body, { message: "success" });
      assert.deepEqual((await get2("otp", "bob@example.org")).body, { message: "success" });
      const noOtp = await get2("otp", "alice@example.org");
      assert.equal(noOtp.status, 404);
      assert.deepEqual(noOtp.body, { message: "user not found" });
      const other = await get2("webauthn", "alice@example.org");
      assert.equal(other.status, 404);
      assert.deepEqual(other.body, { message: "not supported" });
      assert.equal((await get2("password", "change@example.org")).status, 403);
      assert.equal((await get2("password", "nobody@example.org")).status, 404);
    });
  });

  describe("retention", () => {
    const db = () => service.services.database.db;
    const lastLogin = async (email: string) =>
      (
        await db()
          .selectFrom("users")
          .select("last_login_time")
          .where("email", "=", email)
          .executeTakeFirstOrThrow()
      ).last_login_time;

    test("touch stores the exact timestamp if newer, answers []", async () => {
      const t = Math.floor(Date.now() / 1000) - 1000;
      const res = await service.request("PUT", "/api/retention/carol_x@example.org/touch", {
        token: retention,
        json: { timestamp: t },
      });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, []);
      assert.equal(await lastLogin("carol_x@example.org"), t);
      await service.request("PUT", "/api/retention/carol_x@example.org/touch", {
        token: retention,
        json: { timestamp: t - 500 },
      });
      assert.equal(await lastLogin("carol_x@example.org"), t, "an older timestamp does not move it back");
    });

    test("touch without a timestamp uses now; a future one is 400; unknown users 404", async () => {
      const before = Math.floor(Date.now() / 1000);
      assert.equal(
        (
          await service.request("PUT", "/api/retention/erin@example.com/touch", {
            token: retention,
            json: {},
          })
        ).status,
        200,
      );
      assert.ok(((await lastLogin("erin@example.com")) ?? 0) >= before);
      // Content-Type: application/json with an empty body (what many HTTP clients send) is no body.
      const bodiless = await service.request("PUT", "/api/retention/erin@example.com/touch", {
        token: retention,
        headers: { "content-type": "application/json" },
        body: "",
      });
      assert.equal(bodiless.status, 200);
      assert.deepEqual(bodiless.body, []);
      const future = await service.request("PUT", "/api/retention/erin@example.com/touch", {
        token: retention,
        json: { timestamp: before + 3600 },
      });
      assert.equal(future.status, 400);
      assert.deepEqual(future.body, { message: "timestamp in future" });
      assert.equal(
        (
          await service.request("PUT", "/api/retention/nobody@example.org/touch", {
            token: retention,
            json: {},
          })
        ).status,
        404,
      );
      const bad = await service.request("PUT", "/api/retention/erin@example.com/touch", {
        token: retention,
        json: { timestamp: "soon" },
      });
      assert.equal(bad.status, 400);
    });

    test("users lists active users without sign-in for two years", async () => {
      const now = Math.floor(Date.now() / 1000);
      const old = now - 731 * 86400;
      await db()
        .updateTable("users")
        .set({ last_login_time: old })
        .where("email", "=", "dave%@example.org")
        .execute();
      await db()
        .updateTable("users")
        .set({ last_login_time: null, created_at: old })
        .where("email", "=", "spam@example.org")
        .execute();
      await db()
        .updateTable("users")
        .set({ last_login_time: old })
        .where("email", "=", "gone@example.org")
        .execute();
      const res = await service.request("GET", "/api/retention/users", { token: retention });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, ["dave%@example.org", "spam@example.org"]);
    });
  });
});
