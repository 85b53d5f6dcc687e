import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { recoveryExpirySeconds, recoveryWaitSeconds } from "../src/accounts/recovery.ts";
import { openSecretBox, publicKeyMatchesPrivateKey } from "../src/credentials/mailcrypt.ts";
import { byTest, password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

/** The recovery rule (accounts/recovery.ts) on the test database: periods, e-mail, key material. */
describe("recovery with the recovery token", () => {
  let service: TestService;
  const request = { client: "192.0.2.7", locale: "en" as const };
  const newPassword = "a new and rather long passphrase 42";
  let serial = 0;

  before(async () => {
    // The relay is never contacted here: the outbox only needs one configured to be written.
    service = await startService({ serviceOptions: { smtpUrl: "smtp://127.0.0.1:9" } });
    await service.services.domains.create("example.org");
  });
  after(async () => {
    await service.close();
  });
  beforeEach(async () => {
    await service.services.database.db.deleteFrom("sign_in_failures").execute();
    await service.services.database.db.deleteFrom("mail_outbox").execute();
  });

  const db = () => service.services.database.db;
  const now = () => Math.floor(Date.now() / 1000);
  /** A fresh user with MailCrypt keys and its recovery token. */
  const newUser = async () => {
    const email = `r${++serial}@example.org`;
    const { recoveryToken } = await service.services.users.create({ email, password, mailCrypt: true });
    assert.ok(recoveryToken);
    return { email, token: recoveryToken };
  };
  const row = (email: string) =>
    db().selectFrom("users").selectAll().where("email", "=", email).executeTakeFirstOrThrow();
  const setStart = (email: string, start: number | null) =>
    db().updateTable("users").set({ recovery_start_time: start }).where("email", "=", email).execute();
  const mails = () => db().selectFrom("mail_outbox").selectAll().execute();

  test("a wrong token or an unknown address is one answer, and nothing starts", async () => {
    const { email, token } = await newUser();
    const { recovery } = service.services;
    assert.deepEqual(await recovery.check(email, "00000000-0000-4000-8000-000000000000", request), {
      kind: "wrong",
    });
    assert.deepEqual(await recovery.check("nobody@example.org", token, request), { kind: "wrong" });
    assert.deepEqual(await recovery.check(email, "not a token", request), { kind: "wrong" });
    assert.equal((await row(email)).recovery_start_time, null);
    assert.equal((await mails()).length, 0);
  });

  test("the first check starts the wait and writes the e-mail with it; a second check changes nothing", async () => {
    const { email, token } = await newUser();
    const before = now();
    const first = await service.services.recovery.check(email, token.toUpperCase(), request);
    assert.equal(first.kind, "waiting");
    assert.ok(first.kind === "waiting" && first.started);
    const start = (await row(email)).recovery_start_time;
    assert.equal(typeof start, "number");
    assert.ok(start !== null && start >= before);
    assert.equal(first.kind === "waiting" && first.activeFrom, (start ?? 0) + recoveryWaitSeconds);
    const second = await service.services.recovery.check(email, token, { ...request, locale: "de" });
    assert.deepEqual(second, {
      kind: "waiting",
      activeFrom: (start ?? 0) + recoveryWaitSeconds,
      started: false,
    });
    const written = await mails();
    assert.equal(written.length, 1);
    assert.equal(written[0]?.recipient, email);
    assert.match(written[0]?.subject ?? "", /will be reset/);
    assert.ok(!written[0]?.body.includes(token), "no token in the e-mail");
  });

  test("concurrent first checks start once and write one e-mail", async () => {
    const { email, token } = await newUser();
    const results = await Promise.all(
      [0, 1, 2].map(() => service.services.recovery.check(email, token, request)),
    );
    assert.equal(results.filter((r) => r.kind === "waiting" && r.started).length, 1);
    assert.ok(results.every((r) => r.kind === "waiting"));
    assert.equal((await mails()).length, 1);
  });

  test("the new password is refused before 2 days and after 30; between them it replaces every credential", async () => {
    const { email, token } = await newUser();
    const { recovery, users } = service.services;
    await users.enableTotp(email, {}, byTest);
    await recovery.check(email, token, request);
    assert.equal((await recovery.complete(email, token, newPassword, request)).kind, "waiting");

    await setStart(email, now() - recoveryExpirySeconds - 60);
    assert.deepEqual(await recovery.complete(email, token, newPassword, request), { kind: "expired" });
    await setStart(email, null);
    assert.deepEqual(await recovery.complete(email, token, newPassword, request), { kind: "expired" });

    await setStart(email, now() - recoveryWaitSeconds - 60);
    const ready = await recovery.check(email, token, request);
    assert.equal(ready.kind, "ready");
    const before = await row(email);
    const session = {
      id_hash: `h${serial}`.padEnd(64, "0"),
      user_id: before.id,
      stage: "signed_in" as const,
    };
    await db()
      .insertInto("web_sessions")
      .values({ ...session, data: "{}", created_at: now(), last_seen_at: now() })
      .execute();
    const done = await recovery.complete(email, token.toUpperCase(), newPassword, request);
    assert.equal(done.kind, "done");
    const newToken = done.kind === "done" ? done.recoveryToken : "";

    const after = await row(email);
    const privateKey = await openSecretBox(
      after.mail_crypt_secret_box ?? "",
      newPassword,
      service.services.pool,
    );
    assert.equal(after.mail_crypt_public_key, before.mail_crypt_public_key, "the same key pair");
    assert.ok(publicKeyMatchesPrivateKey(after.mail_crypt_public_key ?? "", privateKey));
    assert.equal(
      await openSecretBox(after.recovery_secret_box ?? "", newToken, service.services.pool),
      privateKey,
    );
    assert.equal(after.recovery_start_time, null);
    assert.equal(after.totp_secret, null);
    assert.equal(Number(after.totp_confirmed), 0);
    assert.equal(after.totp_backup_codes, "[]");
    assert.equal(
      (await db().selectFrom("web_sessions").select("id_hash").where("user_id", "=", after.id).execute())
        .length,
      0,
      "every web session ended",
    );
    assert.equal((await service.services.signIn.signIn(email, newPassword)).kind, "ok");
    // Used up: the old token opens nothing, a repeated final step is refused.
    assert.deepEqual(await recovery.complete(email, token, newPassword, request), { kind: "wrong" });
    assert.deepEqual(await recovery.check(email, token, request), { kind: "wrong" });
  });

  test("after 30 days a check starts the recovery again and tells the account again", async () => {
    const { email, token } = await newUser();
    await setStart(email, now() - recoveryExpirySeconds - 60);
    const result = await service.services.recovery.check(email, token, request);
    assert.ok(result.kind === "waiting" && result.started);
    assert.ok(((await row(email)).recovery_start_time ?? 0) >= now() - 5);
    assert.equal((await mails()).length, 1);
  });

  test("inconsistent key material (a box missing, as the reference's bug 8 left it) ends consistent", async () => {
    const { email, token } = await newUser();
    await db()
      .updateTable("users")
      .set({
        mail_crypt_secret_box: null,
        mail_crypt_public_key: null,
        recovery_start_time: now() - 3 * 86400,
      })
      .where("email", "=", email)
      .execute();
    const done = await service.services.recovery.complete(email, token, newPassword, request);
    assert.equal(done.kind, "done");
    const after = await row(email);
    const privateKey = await openSecretBox(
      after.mail_crypt_secret_box ?? "",
      newPassword,
      service.services.pool,
    );
    assert.ok(publicKeyMatchesPrivateKey(after.mail_crypt_public_key ?? "", privateKey));
  });

  test("a user without a recovery token cannot recover", async () => {
    await service.services.users.create({ email: "nokeys@example.org", password, mailCrypt: false });
    assert.equal((await row("nokeys@example.org")).recovery_secret_box, null);
    assert.deepEqual(
      await service.services.recovery.check(
        "nokeys@example.org",
        "00000000-0000-4000-8000-000000000000",
        request,
      ),
      { kind: "wrong" },
    );
  });

  test("failures are throttled per address", async () => {
    const { email, token } = await newUser();
    for (let i = 0; i < 5; i++)
      await service.services.recovery.check(email, `00000000-0000-4000-8000-00000000000${i}`, request);
    const throttled = await service.services.recovery.check(email, token, request);
    assert.equal(throttled.kind, "throttled");
    // The owner from a clean address is not held back by the attacker's failures.
    const owner = await service.services.recovery.check(email, token, { ...request, client: "198.51.100.1" });
    assert.equal(owner.kind, "waiting");
  });
});
