import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ownerOrigin } from "../src/accounts/security-events.ts";
import type { User } from "../src/accounts/users.ts";
import { InstallationSecret } from "../src/config.ts";
import {
  appPasswordLookupHash,
  generateAppPassword,
  normalizeAppPassword,
} from "../src/credentials/app-passwords.ts";
import { CryptoPool } from "../src/credentials/crypto-pool.ts";
import { hashPassword } from "../src/credentials/passwords.ts";
import { ServiceError } from "../src/errors.ts";
import { byTest, markDeleted, password } from "./helpers/fixtures.ts";
import { installationSecret, startService, type TestService } from "./helpers/service.ts";
import { WebClient } from "./helpers/web-client.ts";

/** A real pool that counts the jobs (Argon2 derivations) run through it. */
class CountingPool extends CryptoPool {
  jobs = 0;
  override run<T>(job: () => Promise<T>): Promise<T> {
    this.jobs++;
    return super.run(job);
  }
}

const owner = ownerOrigin("web", "192.0.2.1");
/** The refusal of this code, and only it. */
const isRefusal = (error: unknown, code: string) => error instanceof ServiceError && error.code === code;

describe("app passwords", () => {
  let service: TestService;
  let pool: CountingPool;
  let mailbox: string;
  let mta: string;
  let webmail: string;
  let identity: string;
  let client = 0;
  /** Each request from its own address: the guard's per-client pacing stays out of the way. */
  const nextClient = () => `198.51.100.${(client++ % 250) + 1}`;

  const passdb = (email: string, secret: string, from = nextClient()) =>
    service.request("POST", `/api/mailbox-server/${email}`, {
      token: mailbox,
      json: { password: secret },
      headers: { "x-client-address": from },
    });
  const smtp = (email: string, secret: string, from = nextClient()) =>
    service.request("POST", "/api/mta/auth", {
      token: mta,
      json: { email, password: secret },
      headers: { "x-client-address": from },
    });
  const user = async (email: string): Promise<User> => {
    const found = await service.services.users.findByEmail(email);
    assert.ok(found, email);
    return found;
  };
  const create = async (email: string, name: string, scope: "mail" | "smtp", secret = password) => {
    const proof = await service.services.signIn.confirmPassword(await user(email), secret, {
      door: "web",
      client: { address: "192.0.2.1" },
    });
    return service.services.appPasswords.createForOwner(proof, { name, scope }, owner);
  };

  before(async () => {
    pool = new CountingPool(2);
    service = await startService({ web: true, pool });
    [mailbox, mta, webmail, identity] = await Promise.all([
      service.token("mailbox-server"),
      service.token("mta"),
      service.token("webmail"),
      service.token("identity"),
    ]);
    const { domains, users } = service.services;
    await domains.create("example.org");
    await domains.create("strict.example");
    for (const name of ["alice", "bob", "carol", "dave", "erin", "frank", "gina", "hank", "ivy"])
      await users.create({ email: `${name}@example.org`, password });
    await users.create({ email: "plain@example.org", password, mailCrypt: false });
    await users.create({ email: "spam@example.org", password, roles: ["ROLE_SPAM"] });
    await users.create({ email: "sam@strict.example", password });
    await users.create({ email: "sue@strict.example", password });
  });
  after(() => service.close());

  test("an app password is four groups of four from a-z and 2-9, taken in any case, dashes optional", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const value = generateAppPassword();
      assert.match(value, /^[a-z2-9]{4}(-[a-z2-9]{4}){3}$/);
      seen.add(value);
    }
    assert.equal(seen.size, 200);
    const value = generateAppPassword();
    const plain = value.replaceAll("-", "");
    for (const spelling of [value, plain, value.toUpperCase(), ` ${plain.toUpperCase()} `])
      assert.equal(normalizeAppPassword(spelling), plain, spelling);
    for (const other of [password, plain.slice(1), `${plain}a`, plain.replace(/./, "0"), `${plain}\0`])
      assert.equal(normalizeAppPassword(other), null, other);
    // 34 symbols, 16 of them: about 81 bits.
    assert.ok(16 * Math.log2(34) > 81);
  });

  test("passdb with a mail app password returns the private key the account password opens", async () => {
    const created = await create("alice@example.org", "Phone", "mail");
    assert.match(created.password, /^[a-z2-9]{4}(-[a-z2-9]{4}){3}$/);
    const byPassword = await passdb("alice@example.org", password);
    assert.equal(byPassword.status, 200);
    const plain = created.password.replaceAll("-", "");
    for (const spelling of [created.password, plain, plain.toUpperCase()]) {
      const byApp = await passdb("alice@example.org", spelling);
      assert.equal(byApp.status, 200, spelling);
      assert.equal(byApp.body.body.mailCrypt, 2);
      assert.equal(byApp.body.body.mailCryptPrivateKey, byPassword.body.body.mailCryptPrivateKey);
      assert.equal(byApp.body.body.mailCryptPublicKey, byPassword.body.body.mailCryptPublicKey);
    }
    assert.equal((await smtp("alice@example.org", created.password)).status, 200);
  });

  test("the value is stored nowhere: only its keyed hash and a box the value alone opens", async () => {
    const created = await create("alice@example.org", "Laptop", "mail");
    const rows = await service.services.database.db.selectFrom("app_passwords").selectAll().execute();
    const text = JSON.stringify(rows);
    const plain = created.password.replaceAll("-", "");
    assert.ok(!text.includes(plain) && !text.includes(created.password));
    const row = rows.find((r) => Number(r.id) === created.id);
    assert.ok(row?.secret_box);
    // Keyed: the service's secret makes the stored hash; any other secret makes another.
    assert.equal(row.lookup_hash, appPasswordLookupHash(plain, installationSecret()));
    assert.notEqual(row.lookup_hash, appPasswordLookupHash(plain, InstallationSecret.generate()));
  });

  test("an SMTP-only app password sends but never opens the mailbox", async () => {
    const created = await create("bob@example.org", "Printer", "smtp");
    assert.equal((await smtp("bob@example.org", created.password)).status, 200);
    const imap = await passdb("bob@example.org", created.password);
    assert.equal(imap.status, 401);
    assert.deepEqual(imap.body, { message: "authentication failed" });
    const events = await service.services.securityEvents.list(
      { email: "bob@example.org", type: "sign_in.failed" },
      { limit: 10, offset: 0 },
    );
    assert.equal(events.items[0]?.detail?.reason, "app_password_scope");
  });

  test("the web, the webmail, identity and every re-confirmation never take an app password", async () => {
    const { password: app } = await create("carol@example.org", "Phone", "mail");
    const web = new WebClient(service.url);
    await web.get("/login");
    const signIn = await web.post("/login", { email: "carol@example.org", password: app });
    assert.notEqual(signIn.location, "/account");
    const aliases = await service.request("POST", "/api/webmail/aliases", {
      token: webmail,
      json: { email: "carol@example.org", password: app },
      headers: { "x-client-address": nextClient() },
    });
    assert.equal(aliases.status, 401);
    const change = await service.request("POST", "/api/webmail/password", {
      token: webmail,
      json: { email: "carol@example.org", password: app, newPassword: "a whole new password 42" },
      headers: { "x-client-address": nextClient() },
    });
    assert.equal(change.status, 401);
    const validate = await service.request("POST", "/api/identity/example.org/validate/carol@example.org", {
      token: identity,
      json: { credentialType: "password", password: app },
      headers: { "x-client-address": nextClient() },
    });
    assert.equal(validate.status, 403);
    await assert.rejects(
      service.services.signIn.confirmPassword(await user("carol@example.org"), app, { door: "web" }),
      (error) => isRefusal(error, "password.wrong"),
    );
    // The account password still works at every one of them.
    assert.equal((await passdb("carol@example.org", password)).status, 200);
  });

  test("a wrong app password costs no derivation, for a known address or an unknown one", async () => {
    await create("dave@example.org", "Phone", "mail");
    const before = pool.jobs;
    for (const email of ["dave@example.org", "nobody@example.org"]) {
      assert.equal((await passdb(email, generateAppPassword())).status, email.startsWith("dave") ? 401 : 404);
      assert.notEqual((await smtp(email, generateAppPassword())).status, 200);
    }
    const { password: app } = await create("dave@example.org", "Tablet", "mail");
    const afterCreate = pool.jobs;
    assert.equal((await passdb("dave@example.org", app)).status, 200);
    assert.equal(pool.jobs, afterCreate, "a right app password: no derivation either");
    // Creating one opened the box with the password: the derivations of the re-confirmation and the box.
    assert.equal(afterCreate - before, 2);
  });

  test("'mail apps must use app passwords' refuses the account password at IMAP and SMTP only", async () => {
    const { appPasswords } = service.services;
    const { password: app } = await create("erin@example.org", "Phone", "mail");
    await appPasswords.setRequired(await user("erin@example.org"), true, owner);
    for (const answer of [
      await passdb("erin@example.org", password),
      await smtp("erin@example.org", password),
    ]) {
      assert.equal(answer.status, 401);
      assert.deepEqual(answer.body, { message: "authentication failed" });
    }
    assert.equal((await passdb("erin@example.org", app)).status, 200);
    assert.equal((await smtp("erin@example.org", app)).status, 200);
    const web = new WebClient(service.url);
    await web.signIn("erin@example.org");
    const refused = await service.services.securityEvents.list(
      { email: "erin@example.org", type: "sign_in.failed" },
      { limit: 10, offset: 0 },
    );
    assert.deepEqual(
      refused.items.map((e) => e.detail?.reason),
      ["app_password_required", "app_password_required"],
    );
    await appPasswords.setRequired(await user("erin@example.org"), false, owner);
    assert.equal((await passdb("erin@example.org", password)).status, 200);
    const changes = await service.services.securityEvents.list(
      { email: "erin@example.org", type: "app_passwords.required_changed" },
      { limit: 10, offset: 0 },
    );
    assert.deepEqual(
      changes.items.map((e) => e.detail?.setting),
      ["off", "on"],
    );
  });

  test("the domain's default applies to users who did not choose, and a user's choice wins", async () => {
    const { database, appPasswords } = service.services;
    await database.db
      .updateTable("domains")
      .set({ app_passwords_required: 1 })
      .where("name", "=", "strict.example")
      .execute();
    assert.equal((await passdb("sam@strict.example", password)).status, 401);
    assert.equal((await smtp("sam@strict.example", password)).status, 401);
    assert.equal(await appPasswords.required(await user("sam@strict.example")), true);
    await appPasswords.setRequired(await user("sue@strict.example"), false, owner);
    assert.equal((await passdb("sue@strict.example", password)).status, 200);
    await appPasswords.setRequired(await user("sue@strict.example"), null, owner);
    assert.equal((await passdb("sue@strict.example", password)).status, 401);
    // Other domains keep their default: off.
    assert.equal((await passdb("alice@example.org", password)).status, 200);
  });

  test("revoking ends an app password at once; another user's id is not found and changes nothing", async () => {
    const { appPasswords } = service.services;
    const phone = await create("frank@example.org", "Phone", "mail");
    const other = await create("gina@example.org", "Phone", "mail");
    await assert.rejects(appPasswords.revoke(await user("frank@example.org"), other.id, owner), (error) =>
      isRefusal(error, "app_password.not_found"),
    );
    assert.equal((await passdb("gina@example.org", other.password)).status, 200);
    await appPasswords.revoke(await user("frank@example.org"), phone.id, owner);
    assert.equal((await passdb("frank@example.org", phone.password)).status, 401);
    assert.equal((await smtp("frank@example.org", phone.password)).status, 401);
    assert.deepEqual(await appPasswords.list(await user("frank@example.org")), []);
    await assert.rejects(appPasswords.revoke(await user("frank@example.org"), phone.id, owner), (error) =>
      isRefusal(error, "app_password.not_found"),
    );
    const events = await service.services.securityEvents.list(
      { email: "frank@example.org" },
      { limit: 20, offset: 0 },
    );
    const types = events.items.map((e) => e.type);
    assert.ok(types.includes("app_password.created") && types.includes("app_password.removed"));
    assert.ok(!JSON.stringify(events).includes(phone.password.replaceAll("-", "")));
  });

  test("a password change keeps app passwords working; a reset revokes them; a deletion removes them", async () => {
    const { lifecycle, signIn, appPasswords, database } = service.services;
    const { password: app } = await create("hank@example.org", "Phone", "mail");
    const proof = await signIn.confirmPassword(await user("hank@example.org"), password, { door: "web" });
    await lifecycle.changePassword(proof, "another long password 7", owner);
    const after = await passdb("hank@example.org", app);
    assert.equal(after.status, 200);
    assert.equal(after.body.body.mailCrypt, 2);
    const byNewPassword = await passdb("hank@example.org", "another long password 7");
    assert.equal(after.body.body.mailCryptPrivateKey, byNewPassword.body.body.mailCryptPrivateKey);

    await lifecycle.reset("hank@example.org", "a reset password here 9", byTest);
    assert.equal((await passdb("hank@example.org", app)).status, 401);
    assert.deepEqual(await appPasswords.list(await user("hank@example.org")), []);

    const { password: ivys } = await create("ivy@example.org", "Phone", "smtp");
    await lifecycle.delete("ivy@example.org", byTest);
    const left = await database.db
      .selectFrom("app_passwords")
      .select("id")
      .where("user_id", "=", (await user("ivy@example.org")).id)
      .execute();
    assert.deepEqual(left, []);
    assert.notEqual((await smtp("ivy@example.org", ivys)).status, 200);
  });

  test("an admin makes SMTP-only app passwords for encrypted mailboxes, mail ones only without keys", async () => {
    const { appPasswords } = service.services;
    await assert.rejects(
      appPasswords.createByAdmin(await user("alice@example.org"), { name: "Scanner", scope: "mail" }, byTest),
      (error) => isRefusal(error, "app_password.needs_owner"),
    );
    const scanner = await appPasswords.createByAdmin(
      await user("alice@example.org"),
      { name: "Scanner", scope: "smtp" },
      byTest,
    );
    assert.equal((await smtp("alice@example.org", scanner.password)).status, 200);
    const plain = await appPasswords.createByAdmin(
      await user("plain@example.org"),
      { name: "Phone", scope: "mail" },
      byTest,
    );
    const imap = await passdb("plain@example.org", plain.password);
    assert.equal(imap.status, 200);
    assert.equal(imap.body.body.mailCrypt, 0);
  });

  test("names and scopes are checked; nothing is created on a refusal", async () => {
    const { appPasswords } = service.services;
    const target = await user("plain@example.org");
    const count = (await appPasswords.list(target)).length;
    for (const [input, code] of [
      [{ name: "", scope: "smtp" }, "app_password.name_invalid"],
      [{ name: "   ", scope: "smtp" }, "app_password.name_invalid"],
      [{ name: "x".repeat(65), scope: "smtp" }, "app_password.name_invalid"],
      [{ name: "a\0b", scope: "smtp" }, "app_password.name_invalid"],
      [{ name: 42, scope: "smtp" }, "app_password.name_invalid"],
      [{ name: "Phone", scope: "imap" }, "app_password.scope_invalid"],
      [{ name: "Phone", scope: null }, "app_password.scope_invalid"],
    ] as const)
      await assert.rejects(appPasswords.createByAdmin(target, input, byTest), (error) =>
        isRefusal(error, code),
      );
    assert.equal((await appPasswords.list(target)).length, count);
    await assert.rejects(
      appPasswords.createForOwner(
        await service.services.signIn.confirmPassword(target, password, { door: "web" }),
        { name: "", scope: "mail" },
        owner,
      ),
      (error) => isRefusal(error, "app_password.name_invalid"),
    );
  });

  test("a user has at most 50, even when creations race", async () => {
    const { appPasswords } = service.services;
    const target = await user("plain@example.org");
    const results = await Promise.allSettled(
      Array.from({ length: 60 }, (_, i) =>
        appPasswords.createByAdmin(target, { name: `n${i}`, scope: "smtp" }, byTest),
      ),
    );
    const refused = results.filter((r) => r.status === "rejected");
    for (const r of refused)
      assert.ok(isRefusal((r as PromiseRejectedResult).reason, "app_password.limit_reached"));
    assert.equal((await appPasswords.list(target)).length, 50);
  });

  test("'last used' is the day and address of a use, written at most once an hour", async () => {
    const { appPasswords, database } = service.services;
    const { id, password: app } = await create("gina@example.org", "Watch", "mail");
    assert.equal((await passdb("gina@example.org", app, "203.0.113.7")).status, 200);
    const first = (await appPasswords.list(await user("gina@example.org"))).find((a) => a.id === id);
    assert.equal(first?.lastUsedAddress, "203.0.113.7");
    assert.ok(first?.lastUsedAt && Math.abs(first.lastUsedAt - Date.now() / 1000) < 60);
    let writes = 0;
    const counted = await startService({
      onStatement: (sql) => {
        if (/update "?app_passwords"?/i.test(sql) || /update `app_passwords`/i.test(sql)) writes++;
      },
    });
    try {
      // The same rule on a second instance over a fresh database: many uses within the hour, one write.
      await counted.services.domains.create("example.org");
      await counted.services.users.create({ email: "one@example.org", password });
      const one = await counted.services.users.findByEmail("one@example.org");
      assert.ok(one);
      const proof = await counted.services.signIn.confirmPassword(one, password, { door: "web" });
      const made = await counted.services.appPasswords.createForOwner(
        proof,
        { name: "Phone", scope: "mail" },
        owner,
      );
      const token = await counted.token("mailbox-server");
      for (let i = 0; i < 5; i++) {
        const answer = await counted.request("POST", "/api/mailbox-server/one@example.org", {
          token,
          json: { password: made.password },
          headers: { "x-client-address": "203.0.113.8" },
        });
        assert.equal(answer.status, 200);
      }
      assert.equal(writes, 1);
    } finally {
      await counted.close();
    }
    await database.db.updateTable("app_passwords").set({ last_used_at: 1 }).where("id", "=", id).execute();
  });

  test("wrong app passwords pass the guard: every failure is counted and the client is held back", async () => {
    const { password: right } = await create("gina@example.org", "Guarded", "mail");
    const from = "203.0.113.66";
    // The cheap path checks first: parallel guesses are not held in line (against 2^81 values that
    // gains nothing), but each failure counts and a client held back gets no check at all.
    const answers = await Promise.all(
      Array.from({ length: 100 }, () => passdb("gina@example.org", generateAppPassword(), from)),
    );
    const statuses = answers.map((a) => a.status);
    assert.ok(
      statuses.every((s) => s === 401 || s === 429),
      statuses.join(","),
    );
    // Whether some of the burst already meet the block depends on when the counters are read (on a
    // database server all may be read before the first failure is written): not judged.
    assert.equal(
      (await passdb("gina@example.org", right, from)).status,
      429,
      "even the right one, unchecked",
    );
    const counter = await service.services.database.db
      .selectFrom("sign_in_failures")
      .select("failures")
      .where("subject", "=", `c:app_password:ip:${from}`)
      .executeTakeFirstOrThrow();
    assert.ok(Number(counter.failures) >= 5, `failures counted: ${counter.failures}`);
    // Another client of the same account is not held back.
    assert.equal((await passdb("gina@example.org", right, "203.0.113.99")).status, 200);
  });

  test("junk app passwords from many addresses do not lock out the owner's phone on a new address", async () => {
    await service.services.users.create({ email: "roamer@example.org", password });
    const { password: app } = await create("roamer@example.org", "Phone", "mail");
    for (let i = 0; i < 25; i++)
      assert.equal(
        (await passdb("roamer@example.org", generateAppPassword(), `2001:db8:99:${i}::1`)).status,
        401,
      );
    assert.equal((await passdb("roamer@example.org", app, "2001:db8:77::1")).status, 200);
  });

  test("deleted and spam users get the ordinary answers with an app password", async () => {
    const { appPasswords } = service.services;
    const spam = await appPasswords.createByAdmin(
      await user("spam@example.org"),
      { name: "x", scope: "smtp" },
      byTest,
    );
    const answer = await smtp("spam@example.org", spam.password);
    assert.equal(answer.status, 403);
    await markDeleted(service.services.database.db, "spam@example.org");
    assert.notEqual((await smtp("spam@example.org", spam.password)).status, 200);
  });

  test("a reset between the confirmation and the creation leaves no app password (holding the old key)", async () => {
    const { signIn, lifecycle, appPasswords, database } = service.services;
    await service.services.users.create({ email: "race@example.org", password });
    const proof = await signIn.confirmPassword(await user("race@example.org"), password, { door: "web" });
    await lifecycle.reset("race@example.org", "a reset password here 9", byTest);
    await assert.rejects(
      appPasswords.createForOwner(proof, { name: "Phone", scope: "mail" }, owner),
      (error) => isRefusal(error, "app_password.credentials_changed"),
    );
    await assert.rejects(
      appPasswords.createForOwner(proof, { name: "Printer", scope: "smtp" }, owner),
      (error) => isRefusal(error, "app_password.credentials_changed"),
    );
    const rows = await database.db
      .selectFrom("app_passwords")
      .select("id")
      .where("user_id", "=", (await user("race@example.org")).id)
      .execute();
    assert.deepEqual(rows, []);
  });

  test("an SMTP-only app password is made without opening the mailbox key", async () => {
    await service.services.users.create({ email: "smtponly@example.org", password });
    const proof = await service.services.signIn.confirmPassword(
      await user("smtponly@example.org"),
      password,
      {
        door: "web",
      },
    );
    const before = pool.jobs;
    await service.services.appPasswords.createForOwner(proof, { name: "Printer", scope: "smtp" }, owner);
    assert.equal(pool.jobs, before);
  });

  test("the owner's old client still sending the refused account password locks out nothing", async () => {
    const { appPasswords, users } = service.services;
    await users.create({ email: "oldphone@example.org", password });
    const home = "203.0.113.50";
    // The owner's home address signed in before, with the password (it is trusted for it).
    assert.equal((await passdb("oldphone@example.org", password, home)).status, 200);
    const { password: app } = await create("oldphone@example.org", "New phone", "mail");
    await appPasswords.setRequired(await user("oldphone@example.org"), true, owner);
    for (let i = 0; i < 8; i++)
      assert.equal((await passdb("oldphone@example.org", password, home)).status, 401, `old client ${i}`);
    assert.equal((await passdb("oldphone@example.org", app, home)).status, 200, "the new phone at home");
    const refusals = await service.services.securityEvents.list(
      { email: "oldphone@example.org", type: "sign_in.failed" },
      { limit: 50, offset: 0 },
    );
    assert.equal(refusals.total, 1, "an old client retrying is recorded once an hour, not per connection");
    // From many addresses (a roaming old phone): no daily ceiling reached, the web still signs in.
    for (let i = 0; i < 22; i++)
      assert.equal((await smtp("oldphone@example.org", password, `2001:db8:${i}::1`)).status, 401);
    const web = new WebClient(service.url);
    await web.signIn("oldphone@example.org");
  });

  test("an app password's success does not make its address trusted for the account password", async () => {
    const { database } = service.services;
    await service.services.users.create({ email: "printer@example.org", password });
    const { password: app } = await create("printer@example.org", "Printer", "smtp");
    assert.equal((await smtp("printer@example.org", app, "203.0.113.77")).status, 200);
    const trusted = await database.db
      .selectFrom("trusted_clients")
      .select("client")
      .where("account", "=", "printer@example.org")
      .execute();
    assert.deepEqual(
      trusted.map((row) => row.client),
      ["app:ip:203.0.113.77"],
    );
  });

  test("an account password of the app-password form set before still works in mail apps", async () => {
    const { users, database } = service.services;
    await users.create({ email: "legacy@example.org", password, mailCrypt: false });
    const legacy = generateAppPassword().replaceAll("-", "");
    // As an older version stored it: the policy did not refuse the form then, so the flag says "maybe".
    await database.db
      .updateTable("users")
      .set({ password: await hashPassword(legacy, pool), password_app_form: 1 })
      .where("email", "=", "legacy@example.org")
      .execute();
    assert.equal((await passdb("legacy@example.org", legacy)).status, 200);
    assert.equal(
      (await smtp("legacy@example.org", legacy.toUpperCase())).status,
      401,
      "the password as typed, no other",
    );
    assert.equal((await smtp("legacy@example.org", legacy)).status, 200);
    const before = pool.jobs;
    assert.equal((await passdb("legacy@example.org", generateAppPassword())).status, 401);
    assert.equal(pool.jobs - before, 1, "a wrong one of that form is tried as the password too");
    // A right password of another form tells that the password is not of the form: the flag goes.
    await database.db
      .updateTable("users")
      .set({ password: await hashPassword(password, pool), password_app_form: 1 })
      .where("email", "=", "legacy@example.org")
      .execute();
    assert.equal((await passdb("legacy@example.org", password)).status, 200);
    assert.equal((await user("legacy@example.org")).passwordMayHaveAppForm, false);
    const after = pool.jobs;
    assert.equal((await passdb("legacy@example.org", generateAppPassword())).status, 401);
    assert.equal(pool.jobs, after);
    // Every password the policy checked since is not of the form.
    assert.equal((await user("alice@example.org")).passwordMayHaveAppForm, false);
  });

  test("the password policy refuses an account password of the app-password form", async () => {
    await assert.rejects(
      service.services.users.create({ email: "shape@example.org", password: generateAppPassword() }),
      (error) => isRefusal(error, "password.like_app_password"),
    );
    await assert.rejects(
      service.services.users.create({
        email: "shape@example.org",
        password: generateAppPassword().replaceAll("-", "").toUpperCase(),
      }),
      (error) => isRefusal(error, "password.like_app_password"),
    );
  });
});
