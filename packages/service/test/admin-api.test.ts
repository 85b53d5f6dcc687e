import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as openpgp from "openpgp";
import { toUserView } from "../src/accounts/users.ts";
import { startService, type TestService } from "./helpers/service.ts";

const password = "correct horse battery staple";
const newPassword = "a brand new password 42";

describe("admin API", () => {
  let service: TestService;
  let admin: string;
  const call = (method: string, path: string, json?: unknown) =>
    service.request(method, `/api/admin${path}`, { token: admin, ...(json === undefined ? {} : { json }) });

  before(async () => {
    service = await startService();
    admin = await service.token("admin");
  });
  after(() => service.close());

  test("requires a token with the admin scope", async () => {
    assert.equal((await service.request("GET", "/api/admin/domains")).status, 401);
    const mta = await service.token("mta");
    assert.equal((await service.request("GET", "/api/admin/domains", { token: mta })).status, 403);
  });

  describe("domains", () => {
    test("create, read, list with search and paging", async () => {
      const created = await call("POST", "/domains", { name: "Example.org" });
      assert.equal(created.status, 201);
      assert.equal(created.body.name, "example.org");
      assert.equal((await call("POST", "/domains", { name: "example.org" })).status, 409);
      assert.equal((await call("POST", "/domains", { name: "not a domain" })).status, 422);
      assert.equal((await call("POST", "/domains", {})).status, 422);
      for (const name of ["example.com", "other.net", "zzz.org"]) await call("POST", "/domains", { name });
      const list = await call("GET", "/domains?limit=2&offset=1");
      assert.equal(list.body.total, 4);
      assert.deepEqual(
        list.body.items.map((d: { name: string }) => d.name),
        ["example.org", "other.net"],
      );
      assert.deepEqual(
        (await call("GET", "/domains?search=.org")).body.items.map((d: { name: string }) => d.name),
        ["example.org", "zzz.org"],
      );
      assert.equal((await call("GET", "/domains?limit=501")).status, 422);
      const one = await call("GET", "/domains/example.org");
      assert.equal(one.status, 200);
      assert.equal(one.body.activeUsers, 0);
      assert.equal((await call("GET", "/domains/nowhere.org")).status, 404);
    });
  });

  describe("users and lifecycle", () => {
    test("create answers 201 with the user and a recovery token, never a secret", async () => {
      const res = await call("POST", "/users", {
        email: "alice@example.org",
        password,
        roles: ["ROLE_ADMIN"],
        quota: 2048,
        smtpQuota: { per_hour: 5, per_day: 100 },
      });
      assert.equal(res.status, 201);
      assert.match(res.body.recoveryToken, /^[0-9a-f-]{36}$/);
      assert.deepEqual(Object.keys(res.body).sort(), [
        "appPasswordsRequired",
        "createdAt",
        "deleted",
        "domain",
        "email",
        "hasMailCryptKeys",
        "hasRecoveryToken",
        "lastLoginTime",
        "mailCrypt",
        "passwordChangeRequired",
        "quota",
        "recoveryToken",
        "roles",
        "smtpQuota",
        "totpEnabled",
        "updatedAt",
      ]);
      assert.equal(res.body.mailCrypt, true);
      assert.deepEqual(res.body.roles, ["ROLE_USER", "ROLE_ADMIN"]);
      assert.deepEqual(res.body.smtpQuota, { per_hour: 5, per_day: 100 });
      assert.doesNotMatch(res.text, /argon2|BEGIN|secret/i);
      const plain = await call("POST", "/users", { email: "bob@example.org", password, mailCrypt: false });
      assert.equal(plain.status, 201);
      assert.equal(plain.body.recoveryToken, undefined);
    });

    test("create errors: 409 taken, 422 invalid", async () => {
      assert.equal((await call("POST", "/users", { email: "alice@example.org", password })).status, 409);
      const cases = [
        { email: "x@unmanaged.net", password },
        { email: "not-an-address", password },
        { email: "c@example.org", password: "short" },
        { email: "c@example.org", password, roles: ["ROLE_KING"] },
        { email: "c@example.org", password, quota: -1 },
        { email: "c@example.org", password, smtpQuota: { per_hour: "many" } },
        { email: "c@example.org", password, mailCrypt: "yes" },
      ];
      for (const body of cases) {
        const res = await call("POST", "/users", body);
        assert.equal(res.status, 422, JSON.stringify(body));
        assert.equal(typeof res.body.message, "string");
      }
      assert.equal((await call("GET", "/users/c@example.org")).status, 404, "nothing was written");
    });

    test("read, list and filter", async () => {
      const one = await call("GET", "/users/ALICE@example.org");
      assert.equal(one.status, 200);
      assert.equal(one.body.email, "alice@example.org");
      assert.equal((await call("GET", "/users/nobody@example.org")).status, 404);
      const list = await call("GET", "/users?domain=example.org");
      assert.deepEqual(
        list.body.items.map((u: { email: string }) => u.email),
        ["alice@example.org", "bob@example.org"],
      );
      assert.equal(list.body.total, 2);
      assert.equal((await call("GET", "/users?status=weird")).status, 422);
    });

    test("patch changes what it names and validates everything first", async () => {
      const res = await call("PATCH", "/users/bob@example.org", {
        quota: 100,
        passwordChangeRequired: true,
        roles: ["ROLE_PERMANENT"],
        lastLoginTime: 1_600_000_000,
      });
      assert.equal(res.status, 200);
      assert.equal(res.body.quota, 100);
      assert.equal(res.body.passwordChangeRequired, true);
      assert.deepEqual(res.body.roles, ["ROLE_USER", "ROLE_PERMANENT"]);
      assert.equal(res.body.lastLoginTime, 1_600_000_000);
      const bad = await call("PATCH", "/users/bob@example.org", { quota: 5, roles: "ROLE_ADMIN" });
      assert.equal(bad.status, 422);
      assert.equal((await call("GET", "/users/bob@example.org")).body.quota, 100, "nothing written on 422");
      const noKeys = await call("PATCH", "/users/bob@example.org", { mailCrypt: true });
      assert.equal(noKeys.status, 422);
      assert.equal(
        (await call("PATCH", "/users/bob@example.org", { passwordChangeRequired: false })).status,
        200,
      );
      assert.equal((await call("PATCH", "/users/nobody@example.org", { quota: 1 })).status, 404);
    });

    test("totp: enable with generated values, disable", async () => {
      const res = await call("PUT", "/users/bob@example.org/totp", {});
      assert.equal(res.status, 200);
      assert.match(res.body.secret, /^[A-Z2-7]{52}$/);
      assert.equal(res.body.backupCodes.length, 6);
      assert.equal((await call("GET", "/users/bob@example.org")).body.totpEnabled, true);
      const given = await call("PUT", "/users/bob@example.org/totp", {
        secret: "JBSWY3DPEHPK3PXP",
        backupCodes: ["123456"],
      });
      assert.deepEqual(given.body, { secret: "JBSWY3DPEHPK3PXP", backupCodes: ["123456"] });
      assert.equal((await call("PUT", "/users/bob@example.org/totp", { secret: "not base32!" })).status, 422);
      assert.equal((await call("DELETE", "/users/bob@example.org/totp")).status, 204);
      assert.equal((await call("GET", "/users/bob@example.org")).body.totpEnabled, false);
    });

    test("reset: old password fails, new password opens a new key; 404 for deleted users", async () => {
      const { db } = service.services.database;
      const mailbox = await service.token("mailbox-server");
      const before = await db
        .selectFrom("users")
        .select("mail_crypt_public_key")
        .where("email", "=", "alice@example.org")
        .executeTakeFirstOrThrow();
      const res = await call("POST", "/users/alice@example.org/reset", { password: newPassword });
      assert.equal(res.status, 200);
      assert.match(res.body.recoveryToken, /^[0-9a-f-]{36}$/);
      const old = await service.request("POST", "/api/mailbox-server/alice@example.org", {
        token: mailbox,
        json: { password },
      });
      assert.equal(old.status, 401);
      const fresh = await service.request("POST", "/api/mailbox-server/alice@example.org", {
        token: mailbox,
        json: { password: newPassword },
      });
      assert.equal(fresh.status, 200);
      assert.equal(fresh.body.body.mailCrypt, 2);
      assert.notEqual(fresh.body.body.mailCryptPublicKey, before.mail_crypt_public_key, "a new key pair");
      assert.equal((await call("POST", "/users/alice@example.org/reset", { password: "short" })).status, 422);
      assert.equal(
        (await call("POST", "/users/nobody@example.org/reset", { password: newPassword })).status,
        404,
      );
    });

    test("reset at every MailCrypt level leaves passdb consistent", async () => {
      const mailbox = await service.token("mailbox-server");
      await call("POST", "/users", { email: "levels@example.org", password, mailCrypt: true });
      for (const level of [0, 1, 2, 3]) {
        await service.services.settings.update({ mail_crypt: level });
        const pw = `${newPassword} level ${level}`;
        assert.equal((await call("POST", "/users/levels@example.org/reset", { password: pw })).status, 200);
        for (const checkLevel of [0, 1, 2, 3]) {
          await service.services.settings.update({ mail_crypt: checkLevel });
          const res = await service.request("POST", "/api/mailbox-server/levels@example.org", {
            token: mailbox,
            json: { password: pw },
          });
          assert.equal(
            res.status,
            200,
            `reset at level ${level}, sign-in at level ${checkLevel}: ${res.text}`,
          );
        }
      }
      await service.services.settings.update({ mail_crypt: 2 });
    });

    test("delete: soft, side effects in the database and at the API; a second delete is 404", async () => {
      const { db } = service.services.database;
      const tokens = { mailbox: await service.token("mailbox-server"), mta: await service.token("mta") };
      await call("POST", "/users", { email: "carol@example.org", password });
      await call("POST", "/aliases", { source: "carol-alias@example.com", owner: "carol@example.org" });
      await call("PUT", "/users/carol@example.org/totp", {});
      const { publicKey } = await openpgp.generateKey({
        type: "ecc",
        curve: "curve25519Legacy",
        userIDs: [{ email: "carol-alias@example.com" }],
        format: "armored",
      });
      assert.equal(
        (
          await service.request("PUT", "/api/admin/openpgp-keys/carol-alias@example.com", {
            token: admin,
            json: { key: publicKey },
          })
        ).status,
        200,
      );

      // A client that sends Content-Type: application/json on a bodiless DELETE is answered normally.
      const deleted = await service.request("DELETE", "/api/admin/users/carol@example.org", {
        token: admin,
        headers: { "content-type": "application/json" },
      });
      assert.equal(deleted.status, 204);
      const row = await db
        .selectFrom("users")
        .selectAll()
        .where("email", "=", "carol@example.org")
        .executeTakeFirstOrThrow();
      assert.equal(Boolean(row.deleted), true);
      assert.match(row.password, /^!/);
      assert.equal(row.mail_crypt_public_key, null);
      assert.equal(row.mail_crypt_secret_box, null);
      assert.equal(row.recovery_secret_box, null);
      assert.equal(row.totp_secret, null);
      const alias = await db
        .selectFrom("aliases")
        .selectAll()
        .where("source", "=", "carol-alias@example.com")
        .executeTakeFirstOrThrow();
      assert.equal(Boolean(alias.deleted), true);
      assert.equal(alias.user_id, null);
      assert.equal(
        (
          await db
            .selectFrom("openpgp_keys")
            .select("id")
            .where("email", "=", "carol-alias@example.com")
            .execute()
        ).length,
        0,
        "alias key removed",
      );

      assert.equal(
        (await service.request("GET", "/api/mailbox-server/carol@example.org", { token: tokens.mailbox }))
          .status,
        404,
      );
      assert.equal(
        (
          await service.request("POST", "/api/mailbox-server/carol@example.org", {
            token: tokens.mailbox,
            json: { password },
          })
        ).status,
        404,
      );
      assert.equal(
        (await service.request("GET", "/api/mta/mailbox/carol@example.org", { token: tokens.mta })).body,
        false,
      );
      assert.deepEqual(
        (await service.request("GET", "/api/mta/alias/carol-alias@example.com", { token: tokens.mta })).body,
        [],
      );
      assert.equal((await call("DELETE", "/users/carol@example.org")).status, 404);
      assert.equal(
        (await call("POST", "/users", { email: "carol@example.org", password })).status,
        409,
        "never reusable",
      );
      assert.equal(
        (
          await call("POST", "/aliases", {
            source: "carol-alias@example.com",
            destinations: ["x@example.org"],
          })
        ).status,
        409,
      );
      assert.equal(
        (await call("POST", "/users/carol@example.org/reset", { password: newPassword })).status,
        404,
      );
    });

    test("restore: deleted users only; no aliases come back", async () => {
      const mailbox = await service.token("mailbox-server");
      assert.equal(
        (await call("POST", "/users/alice@example.org/restore", { password: newPassword })).status,
        409,
      );
      const res = await call("POST", "/users/carol@example.org/restore", { password: newPassword });
      assert.equal(res.status, 200);
      assert.match(res.body.recoveryToken, /^[0-9a-f-]{36}$/);
      const passdb = await service.request("POST", "/api/mailbox-server/carol@example.org", {
        token: mailbox,
        json: { password: newPassword },
      });
      assert.equal(passdb.status, 200);
      assert.equal(passdb.body.body.mailCrypt, 2);
      assert.equal((await call("GET", "/aliases/carol-alias@example.com")).body.deleted, true);
      assert.equal(
        (await call("POST", "/users/nobody@example.org/restore", { password: newPassword })).status,
        404,
      );
    });
  });

  describe("aliases", () => {
    test("create, read, list, patch, delete", async () => {
      const created = await call("POST", "/aliases", {
        source: "team@example.org",
        destinations: ["alice@example.org", "bob@example.org"],
        smtpQuota: { per_hour: 3 },
      });
      assert.equal(created.status, 201);
      assert.deepEqual(created.body.destinations, ["alice@example.org", "bob@example.org"]);
      assert.deepEqual(created.body.smtpQuota, { per_hour: 3, per_day: null });
      const owned = await call("POST", "/aliases", { source: "bobby@example.org", owner: "bob@example.org" });
      assert.deepEqual(owned.body.destinations, ["bob@example.org"]);
      assert.equal(owned.body.owner, "bob@example.org");
      assert.equal(
        (await call("POST", "/aliases", { source: "team@example.org", destinations: ["x@example.org"] }))
          .status,
        409,
      );
      assert.equal(
        (await call("POST", "/aliases", { source: "alice@example.org", destinations: ["x@example.org"] }))
          .status,
        409,
      );
      assert.equal((await call("POST", "/aliases", { source: "new@example.org" })).status, 422);
      assert.equal(
        (await call("POST", "/aliases", { source: "new@example.org", destinations: ["bad"] })).status,
        422,
      );
      assert.equal(
        (await call("POST", "/aliases", { source: "new@example.org", owner: "nobody@example.org" })).status,
        422,
      );
      assert.deepEqual(
        (await call("GET", "/aliases?owner=bob@example.org")).body.items.map(
          (a: { source: string }) => a.source,
        ),
        ["bobby@example.org"],
      );
      assert.ok((await call("GET", "/aliases?domain=example.org")).body.total >= 2);
      const patched = await call("PATCH", "/aliases/team@example.org", {
        destinations: ["bob@example.org"],
        smtpQuota: null,
      });
      assert.deepEqual(patched.body.destinations, ["bob@example.org"]);
      assert.deepEqual(patched.body.smtpQuota, { per_hour: null, per_day: null });
      assert.equal((await call("PATCH", "/aliases/team@example.org", { destinations: [] })).status, 422);
      assert.equal((await call("GET", "/aliases/none@example.org")).status, 404);
      assert.equal((await call("DELETE", "/aliases/team@example.org")).status, 204);
      assert.equal((await call("DELETE", "/aliases/team@example.org")).status, 404);
      assert.equal((await call("GET", "/aliases/team@example.org")).body.deleted, true);
      assert.equal(
        (await call("POST", "/aliases", { source: "team@example.org", destinations: ["x@example.org"] }))
          .status,
        409,
        "the address stays taken",
      );
    });
  });

  describe("settings and API tokens", () => {
    test("settings: all with values; a patch is validated whole", async () => {
      const all = await call("GET", "/settings");
      assert.equal(all.body.mail_crypt, 2);
      assert.equal(all.body.mta_sts_mode, "testing");
      const ok = await call("PATCH", "/settings", {
        smtp_quota_limit_per_hour: 50,
        abuse_address: "abuse-desk@example.org",
      });
      assert.equal(ok.status, 200);
      assert.equal(ok.body.smtp_quota_limit_per_hour, 50);
      const bad = await call("PATCH", "/settings", { smtp_quota_limit_per_day: 7, mta_sts_mode: "paranoid" });
      assert.equal(bad.status, 422);
      assert.match(bad.body.message, /mta_sts_mode/);
      assert.equal((await call("GET", "/settings")).body.smtp_quota_limit_per_day, 0, "nothing written");
      assert.equal((await call("PATCH", "/settings", { no_such_setting: 1 })).status, 422);
    });

    test("api tokens: plain value once, then only metadata; delete", async () => {
      const created = await call("POST", "/api-tokens", { name: "postfix", scopes: ["mta"] });
      assert.equal(created.status, 201);
      assert.match(created.body.token, /^[0-9a-f]{64}$/);
      assert.equal(
        (await service.request("GET", "/api/mta/domain/example.org", { token: created.body.token })).status,
        200,
      );
      const list = await call("GET", "/api-tokens");
      assert.ok(list.body.items.some((t: { name: string }) => t.name === "postfix"));
      assert.doesNotMatch(list.text, new RegExp(created.body.token));
      assert.equal((await call("POST", "/api-tokens", { name: "x", scopes: ["root"] })).status, 422);
      assert.equal((await call("DELETE", `/api-tokens/${created.body.id}`)).status, 204);
      assert.equal(
        (await service.request("GET", "/api/mta/domain/example.org", { token: created.body.token })).status,
        401,
      );
      assert.equal((await call("DELETE", `/api-tokens/${created.body.id}`)).status, 404);
      assert.equal((await call("DELETE", "/api-tokens/abc")).status, 400);
    });
  });

  describe("webhooks", () => {
    test("create with a random secret, read, patch, delete, deliveries, retry", async () => {
      const created = await call("POST", "/webhooks", {
        url: "http://127.0.0.1:9/hook",
        events: ["user.deleted"],
      });
      assert.equal(created.status, 201);
      assert.equal(typeof created.body.secret, "string");
      assert.ok(created.body.secret.length >= 32);
      const id = created.body.id;
      assert.doesNotMatch((await call("GET", "/webhooks")).text, new RegExp(created.body.secret));
      assert.equal((await call("GET", `/webhooks/${id}`)).body.url, "http://127.0.0.1:9/hook");
      const patched = await call("PATCH", `/webhooks/${id}`, { enabled: false, domains: ["example.org"] });
      assert.equal(patched.body.enabled, false);
      assert.deepEqual(patched.body.domains, ["example.org"]);
      for (const body of [
        { url: "ftp://x", events: ["user.deleted"] },
        { url: "http://x.org", events: [] },
        { url: "http://x.org", events: ["user.exploded"] },
        { url: "http://x.org", events: ["user.deleted"], domains: ["nowhere.net"] },
      ]) {
        assert.equal((await call("POST", "/webhooks", body)).status, 422, JSON.stringify(body));
      }
      assert.equal((await call("GET", `/webhooks/${id}/deliveries?status=failed`)).body.total, 0);
      assert.equal((await call("GET", `/webhooks/${id}/deliveries?status=odd`)).status, 422);
      assert.equal((await call("POST", "/webhook-deliveries/01ARZ3NDEKTSV4RRFFQ69G5FAV/retry")).status, 404);
      assert.equal((await call("DELETE", `/webhooks/${id}`)).status, 204);
      assert.equal((await call("GET", `/webhooks/${id}`)).status, 404);
      assert.equal((await call("GET", "/webhooks/999999/deliveries")).status, 404);
    });
  });

  describe("OpenPGP keys", () => {
    test("import keeps only the address's user IDs, WKD serves it, delete stops it", async () => {
      const { publicKey } = await openpgp.generateKey({
        type: "ecc",
        curve: "curve25519Legacy",
        userIDs: [
          { name: "Bob", email: "bob@example.org" },
          { name: "Other", email: "bob@elsewhere.net" },
        ],
        format: "binary",
      });
      const res = await service.request("PUT", "/api/admin/openpgp-keys/bob@example.org", {
        token: admin,
        headers: { "content-type": "application/octet-stream" },
        body: Buffer.from(publicKey) as unknown as string,
      });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(Object.keys(res.body).sort(), [
        "email",
        "expiresAt",
        "fingerprint",
        "keyId",
        "wkdHash",
      ]);
      assert.match(res.body.fingerprint, /^([0-9A-F]{4} ){4}[0-9A-F]{4} {2}([0-9A-F]{4} ){4}[0-9A-F]{4}$/);
      const wkd = await fetch(`${service.url}/.well-known/openpgpkey/example.org/hu/${res.body.wkdHash}`);
      assert.equal(wkd.status, 200);
      const key = await openpgp.readKey({ binaryKey: new Uint8Array(await wkd.arrayBuffer()) });
      assert.deepEqual(
        key.users.map((u) => u.userID?.email),
        ["bob@example.org"],
      );
      assert.equal(
        (await call("GET", "/openpgp-keys/bob@example.org")).body.fingerprint,
        res.body.fingerprint,
      );
      const { publicKey: other } = await openpgp.generateKey({
        type: "ecc",
        curve: "curve25519Legacy",
        userIDs: [{ email: "x@y.net" }],
        format: "armored",
      });
      assert.equal((await call("PUT", "/openpgp-keys/bob@example.org", { key: other })).status, 422);
      assert.equal((await call("PUT", "/openpgp-keys/bob@example.org", { key: "garbage" })).status, 422);
      const two = (
        await Promise.all(
          [1, 2].map(() =>
            openpgp.generateKey({
              type: "ecc",
              curve: "curve25519Legacy",
              userIDs: [{ email: "bob@example.org" }],
              format: "armored",
            }),
          ),
        )
      ).map((k) => k.publicKey);
      const both = two.map((k) => k.trim()).join("\n");
      const several = await call("PUT", "/openpgp-keys/bob@example.org", { key: both });
      assert.equal(several.status, 422);
      assert.match(several.body.message, /More than one/);
      assert.equal((await call("PUT", "/openpgp-keys/nobody@example.org", { key: other })).status, 422);
      assert.equal((await call("DELETE", "/openpgp-keys/bob@example.org")).status, 204);
      assert.equal(
        (await fetch(`${service.url}/.well-known/openpgpkey/example.org/hu/${res.body.wkdHash}`)).status,
        404,
      );
      assert.equal((await call("GET", "/openpgp-keys/bob@example.org")).status, 404);
    });
  });

  describe("OpenPGP keys larger than the 64 KiB body limit", () => {
    test("the upload route takes keys up to the importer's limit, armored, as JSON or binary", async () => {
      await call("POST", "/domains", { name: "bigkeys.org" });
      await call("POST", "/users", { email: "big@bigkeys.org", password, mailCrypt: false });
      // A real key padded with 700 user IDs of other addresses, each with its own self-signature.
      const userIDs = [
        { name: "Big", email: "big@bigkeys.org" },
        ...Array.from({ length: 700 }, (_, i) => ({
          name: `Someone Else Number ${i}`,
          email: `someone.else.${i}@elsewhere.example.net`,
        })),
      ];
      const { publicKey } = await openpgp.generateKey({
        type: "ecc",
        curve: "curve25519Legacy",
        userIDs,
        format: "armored",
      });
      assert.ok(publicKey.length > 64 * 1024, `the armored key is ${publicKey.length} bytes`);
      const binary = (await openpgp.readKey({ armoredKey: publicKey })).write();
      assert.ok(binary.byteLength > 64 * 1024, `the binary key is ${binary.byteLength} bytes`);
      const put = (body: string | Uint8Array, contentType: string) =>
        service.request("PUT", "/api/admin/openpgp-keys/big@bigkeys.org", {
          token: admin,
          headers: { "content-type": contentType },
          body: body as string,
        });

      const armored = await put(publicKey, "text/plain");
      assert.equal(armored.status, 200, armored.text);
      const json = await call("PUT", "/openpgp-keys/big@bigkeys.org", { key: publicKey });
      assert.equal(json.status, 200, json.text);
      assert.equal(json.body.fingerprint, armored.body.fingerprint);
      const fromBinary = await put(binary, "application/octet-stream");
      assert.equal(fromBinary.status, 200, fromBinary.text);
      const wkd = await fetch(`${service.url}/.well-known/openpgpkey/bigkeys.org/hu/${armored.body.wkdHash}`);
      const published = await openpgp.readKey({ binaryKey: new Uint8Array(await wkd.arrayBuffer()) });
      assert.deepEqual(
        published.users.map((u) => u.userID?.email),
        ["big@bigkeys.org"],
        "only the address's own user ID is published",
      );

      // Beyond the importer's limit: 422 from the importer; beyond the route's body limit: 413.
      const tooBig = `-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n${"A".repeat(1_600_000)}\n`;
      const refused = await put(tooBig, "text/plain");
      assert.equal(refused.status, 422);
      assert.match(refused.body.message, /^key: larger than 1 MiB/);
      const huge = await put("A".repeat(2 * 1024 * 1024 + 1), "text/plain");
      assert.equal(huge.status, 413);
      assert.deepEqual(huge.body, { message: "Request body too large (limit 2 MiB)." });
      const elsewhere = await service.request("POST", "/api/admin/users", {
        token: admin,
        json: { email: "x@example.org", password: "y".repeat(70 * 1024) },
      });
      assert.equal(elsewhere.status, 413, "other routes keep the 64 KiB limit");
      assert.deepEqual(elsewhere.body, { message: "Request body too large (limit 64 KiB)." });
    });
  });

  describe("domain deletion", () => {
    test("409 while it has active users; force deletes them through the normal path", async () => {
      await call("POST", "/domains", { name: "closing.org" });
      await call("POST", "/users", { email: "u1@closing.org", password, mailCrypt: false });
      await call("POST", "/aliases", { source: "a1@closing.org", destinations: ["u1@closing.org"] });
      await call("POST", "/webhooks", {
        url: "http://127.0.0.1:9/x",
        events: ["user.deleted"],
        domains: ["closing.org"],
      });
      assert.equal((await call("DELETE", "/domains/closing.org")).status, 409);
      assert.equal((await call("DELETE", "/domains/closing.org?force=true")).status, 204);
      assert.equal((await call("GET", "/domains/closing.org")).status, 404);
      const { db } = service.services.database;
      const deliveries = await db
        .selectFrom("webhook_deliveries")
        .select(["type", "body"])
        .where("type", "=", "user.deleted")
        .execute();
      assert.ok(
        deliveries.some((d) => d.body.includes("u1@closing.org")),
        "user.deleted was recorded for the forced deletion",
      );
      const endpoints = (await call("GET", "/webhooks")).body.items.filter(
        (e: { url: string }) => e.url === "http://127.0.0.1:9/x",
      );
      assert.equal(endpoints[0].enabled, false, "an endpoint for only that domain is disabled");
      assert.equal((await call("DELETE", "/domains/closing.org")).status, 404);
    });
  });

  describe("response schemas", () => {
    test("drop and reorder nothing: each answer is the service's own value as JSON", async () => {
      const s = service.services;
      const page = { search: "", limit: 50, offset: 0 };
      const same = async (path: string, value: unknown) => {
        const res = await call("GET", path);
        assert.equal(res.status, 200, path);
        assert.equal(res.text, JSON.stringify(value), path);
      };
      await same("/users/alice@example.org", toUserView(await s.users.get("alice@example.org")));
      await same("/users?status=all", await s.users.list(page, { status: "all" }));
      await same("/aliases/carol-alias@example.com", await s.aliases.get("carol-alias@example.com"));
      await same("/aliases", await s.aliases.list(page, {}));
      await same("/domains", await s.domains.list(page));
      const domain = await s.domains.get("example.org");
      await same("/domains/example.org", {
        ...domain,
        appPasswordsRequired: await s.domains.appPasswordsRequired(domain.id),
        ...(await s.domains.contents(domain.id)),
      });
      await same("/settings", await s.settings.all());
      await same("/api-tokens", { items: await s.tokens.list() });
      const endpoints = await s.webhooks.list();
      await same("/webhooks", { items: endpoints });
      const withDeliveries = endpoints.find((e) => e.url === "http://127.0.0.1:9/x");
      assert.ok(withDeliveries, "the domain deletion test made an endpoint with deliveries");
      await same(`/webhooks/${withDeliveries.id}`, await s.webhooks.get(withDeliveries.id));
      const deliveries = await s.webhooks.deliveries(withDeliveries.id, { limit: 50, offset: 0 });
      assert.ok(deliveries.total > 0);
      await same(`/webhooks/${withDeliveries.id}/deliveries`, deliveries);
      await same("/openpgp-keys/big@bigkeys.org", await s.openPgpKeys.get("big@bigkeys.org"));
    });
  });

  describe("metrics", () => {
    test("off without METRICS_TOKEN", async () => {
      assert.equal((await service.request("GET", "/metrics")).status, 404);
    });
  });
});
