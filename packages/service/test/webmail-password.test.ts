import assert from "node:assert/strict";
import { createHash, createPrivateKey, createPublicKey } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { shaCrypt } from "../src/credentials/sha-crypt.ts";
import { password } from "./helpers/fixtures.ts";
import { leaked, startRangeApi } from "./helpers/range-api.ts";
import { startService, type TestService } from "./helpers/service.ts";

/**
 * POST /api/webmail/password, the password change for the webmail's password plugin (Roundcube's
 * `httpapi` driver posts a form), on the database TEST_DATABASE_URL names. The leaked-password
 * check runs against a local server speaking the k-anonymity range API.
 */

describe("POST /api/webmail/password", () => {
  let service: TestService;
  let range: Awaited<ReturnType<typeof startRangeApi>>;
  let webmail: string;
  let mailbox: string;

  before(async () => {
    range = await startRangeApi();
    service = await startService({ web: true, pwnedPasswordsUrl: range.url });
    [webmail, mailbox] = await Promise.all([service.token("webmail"), service.token("mailbox-server")]);
    const { domains, users } = service.services;
    await domains.create("example.org");
    await users.create({ email: "alice@example.org", password, mailCrypt: true });
    for (const local of ["bob", "carol", "dave"])
      await users.create({ email: `${local}@example.org`, password, mailCrypt: false });
    await users.create({ email: "spam@example.org", password, mailCrypt: false, roles: ["ROLE_SPAM"] });
    await users.create({ email: "change@example.org", password, passwordChangeRequired: true });
  });
  after(async () => {
    await service?.close();
    await new Promise((resolve) => range?.server.close(resolve));
  });

  const change = (body: Record<string, string>, options: { form?: boolean; token?: string } = {}) =>
    service.request("POST", "/api/webmail/password", {
      token: options.token ?? webmail,
      ...(options.form ? { form: body } : { json: body }),
    });

  test("changes the password as the page does: the MailCrypt key is re-sealed, so passdb opens the key userdb publishes", async () => {
    const newPassword = "a brand new passphrase";
    const answer = await change({ email: "alice@example.org", password, newPassword });
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, { message: "success" });
    assert.match(answer.headers.get("content-type") ?? "", /^application\/json/);

    const old = await service.request("POST", "/api/mailbox-server/alice@example.org", {
      token: mailbox,
      json: { password },
    });
    assert.equal(old.status, 401, "the old password is gone");
    const passdb = await service.request("POST", "/api/mailbox-server/alice@example.org", {
      token: mailbox,
      json: { password: newPassword },
    });
    assert.equal(passdb.status, 200);
    const userdb = await service.request("GET", "/api/mailbox-server/alice@example.org", { token: mailbox });
    const privatePem = Buffer.from(passdb.body.body.mailCryptPrivateKey, "base64").toString();
    const derived = createPublicKey(createPrivateKey(privatePem)).export({ type: "spki", format: "pem" });
    assert.equal(derived, Buffer.from(userdb.body.body.mailCryptPublicKey, "base64").toString());
  });

  test("a user whose stored hash is a legacy one (userli's $6$) changes the password too: the sign-in's rehash does not stand in the way", async () => {
    const { users, database } = service.services;
    await users.create({ email: "legacy@example.org", password, mailCrypt: false });
    const legacy = shaCrypt(password, "$6$rounds=5000$saltsaltsaltsalt$");
    assert.ok(legacy);
    await database.db
      .updateTable("users")
      .set({ password: legacy })
      .where("email", "=", "legacy@example.org")
      .execute();
    const newPassword = "a legacy user's new passphrase";
    const answer = await change({ email: "legacy@example.org", password, newPassword });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const stored = await users.findByEmail("legacy@example.org");
    assert.match(stored?.passwordHash ?? "", /^\$argon2id\$/);
    const passdb = await service.request("POST", "/api/mailbox-server/legacy@example.org", {
      token: mailbox,
      json: { password: newPassword },
    });
    assert.equal(passdb.status, 200);
  });

  test("takes a form body, as Roundcube's httpapi driver sends it; the user's web sessions end", async () => {
    // A session on the account page first.
    const login = await fetch(`${service.url}/login`);
    const csrfCookie = login.headers
      .getSetCookie()
      .map((c) => c.split(";")[0])
      .join("; ");
    const token = /name="_csrf" value="([^"]+)"/.exec(await login.text())?.[1] ?? "";
    const signedIn = await fetch(`${service.url}/login`, {
      method: "POST",
      redirect: "manual",
      headers: { cookie: csrfCookie, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ _csrf: token, email: "bob@example.org", password }).toString(),
    });
    assert.equal(signedIn.status, 303);
    const session = signedIn.headers
      .getSetCookie()
      .map((c) => c.split(";")[0])
      .join("; ");
    const account = () =>
      fetch(`${service.url}/account`, { redirect: "manual", headers: { cookie: session } });
    assert.equal((await account()).status, 200);

    const answer = await change(
      { email: "bob@example.org", password, newPassword: "bob's new passphrase" },
      { form: true },
    );
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, { message: "success" });
    const after = await account();
    assert.equal(after.status, 303);
    assert.equal(after.headers.get("location"), "/login");
    const mta = await service.token("mta");
    const auth = await service.request("POST", "/api/mta/auth", {
      token: mta,
      json: { email: "bob@example.org", password: "bob's new passphrase" },
    });
    assert.equal(auth.status, 200);
  });

  test("401 for a wrong password and for an unknown address alike; nothing changes", async () => {
    const before = (await service.services.users.get("carol@example.org")).passwordHash;
    const wrong = await change({
      email: "carol@example.org",
      password: "not her password",
      newPassword: "whatever long enough",
    });
    const unknown = await change({
      email: "nobody@example.org",
      password,
      newPassword: "whatever long enough",
    });
    assert.equal(wrong.status, 401);
    assert.deepEqual(wrong.body, { message: "Bad credentials" });
    assert.deepEqual([unknown.status, unknown.body], [wrong.status, wrong.body]);
    assert.equal((await service.services.users.get("carol@example.org")).passwordHash, before);
  });

  test("422 with the reason for a new password the policy refuses: too short, leaked, identical; nothing changes", async () => {
    const before = (await service.services.users.get("carol@example.org")).passwordHash;
    const short = await change({ email: "carol@example.org", password, newPassword: "short" });
    assert.equal(short.status, 422);
    assert.deepEqual(short.body, { message: "newPassword: the password must have at least 12 characters" });
    range.asked.length = 0;
    const breached = await change({ email: "carol@example.org", password, newPassword: leaked });
    assert.equal(breached.status, 422);
    assert.match(breached.body.message, /^newPassword: the password has been leaked in a data breach/);
    const sha1 = createHash("sha1").update(leaked).digest("hex").toUpperCase();
    assert.deepEqual(range.asked, [sha1.slice(0, 5)], "only the first five hex digits of the SHA-1 left");
    const same = await change({ email: "carol@example.org", password, newPassword: password });
    assert.equal(same.status, 422);
    assert.deepEqual(same.body, { message: "newPassword: the new password is identical with the old one" });
    const missing = await change({ email: "carol@example.org", password });
    assert.equal(missing.status, 422);
    assert.deepEqual(missing.body, { message: "body: newPassword is required" });
    assert.equal((await service.services.users.get("carol@example.org")).passwordHash, before);
  });

  test("a spam-flagged account is refused (403); a user who must change the password may, and the flag clears", async () => {
    const spam = await change({ email: "spam@example.org", password, newPassword: "a brand new passphrase" });
    assert.deepEqual([spam.status, spam.body], [403, { message: "user disabled due to spam role" }]);
    const required = await change({
      email: "change@example.org",
      password,
      newPassword: "the changed passphrase",
    });
    assert.equal(required.status, 200);
    assert.equal((await service.services.users.get("change@example.org")).passwordChangeRequired, false);
  });

  test("the brute-force policy applies: after five failures for an address, 429 with Retry-After; the token guard comes first", async () => {
    for (let i = 0; i < 5; i++) {
      const failed = await change({
        email: "dave@example.org",
        password: `guess number ${i}`,
        newPassword: "x".repeat(12),
      });
      assert.equal(failed.status, 401);
    }
    const throttled = await change({
      email: "dave@example.org",
      password,
      newPassword: "dave's new passphrase",
    });
    assert.equal(throttled.status, 429);
    assert.ok(Number(throttled.headers.get("retry-after")) > 0);
    assert.deepEqual(throttled.body, { message: "too many failed sign-ins, try again later" });

    const mta = await service.token("mta");
    assert.equal(
      (await change({ email: "carol@example.org", password, newPassword: "x".repeat(20) }, { token: mta }))
        .status,
      403,
    );
    assert.equal(
      (await service.request("POST", "/api/webmail/password", { json: { email: "carol@example.org" } }))
        .status,
      401,
    );
    await service.services.database.db.deleteFrom("sign_in_failures").execute();
  });
});
