import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { passkeyNotFound } from "../src/accounts/passkeys.ts";
import { ownerOrigin } from "../src/accounts/security-events.ts";
import { isRefusal } from "../src/errors.ts";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";
import { WebClient } from "./helpers/web-client.ts";
import { SoftAuthenticator, type SoftCredential } from "./helpers/webauthn.ts";

/**
 * Passkeys (accounts/passkeys.ts) through the web's JSON endpoints, on the database
 * TEST_DATABASE_URL names, with a software authenticator: registration after the password, the
 * passkey as second factor at /2fa, the sign-in with a passkey alone, and the rules: the owner's
 * own passkeys only, single-use challenges, the signature counter, who may sign in with a passkey
 * alone, and the passkeys' end with the account (deletion, reset).
 */
describe("passkeys", () => {
  let service: TestService;
  const appUrl = "https://users.example.org";
  const authenticator = new SoftAuthenticator(appUrl);
  const byTest = ownerOrigin("console");

  before(async () => {
    service = await startService({ web: true });
    const { domains, users } = service.services;
    await domains.create("example.org");
    for (const name of ["alice", "bob", "carol", "dave", "erin"])
      await users.create({ email: `${name}@example.org`, password, mailCrypt: false });
  });
  after(async () => {
    await service?.close();
  });

  const db = () => service.services.database.db;
  const eventTypes = async (email: string) =>
    (
      await db()
        .selectFrom("security_events")
        .select("type")
        .where("email", "=", email)
        .orderBy("id")
        .execute()
    ).map((row) => row.type);
  const passkeyRows = (email: string) =>
    db()
      .selectFrom("passkeys")
      .innerJoin("users", "users.id", "passkeys.user_id")
      .select(["passkeys.id", "passkeys.name", "passkeys.counter", "passkeys.last_used_at"])
      .where("users.email", "=", email)
      .execute();
  /** Signed in with the password (and the passkey as second factor, when given), on /account/passkeys. */
  const signedInClient = async (email: string, passkey?: SoftCredential) => {
    let client = new WebClient(service.url);
    if (passkey) {
      client = await atSecondStep(email);
      assert.equal((await secondFactor(client, passkey)).answer.status, 200);
    } else await client.signIn(email);
    await client.get("/account/passkeys");
    return client;
  };
  /** The whole registration as the page's script does it; the answer of the last step. */
  const register = async (client: WebClient, name: string) => {
    const options = await client.postJson("/account/passkeys/options", { name, password });
    assert.equal(options.status, 200, options.text);
    const made = authenticator.create(options.body.options);
    const done = await client.postJson("/account/passkeys", { name, response: made.response });
    return { ...made, done };
  };
  /** A password sign-in that stops at /2fa. */
  const atSecondStep = async (email: string) => {
    const client = new WebClient(service.url);
    await client.get("/login");
    const answer = await client.post("/login", { email, password });
    assert.equal(answer.location, "/2fa");
    return client;
  };
  const secondFactor = async (client: WebClient, credential: SoftCredential) => {
    const options = await client.postJson("/2fa/passkey/options", {});
    assert.equal(options.status, 200, options.text);
    const response = authenticator.get(credential, options.body.options);
    return { response, answer: await client.postJson("/2fa/passkey", { response }) };
  };
  const passkeyAlone = async (credential: SoftCredential) => {
    const client = new WebClient(service.url);
    await client.get("/login");
    const options = await client.postJson("/login/passkey/options", {});
    assert.equal(options.status, 200, options.text);
    assert.deepEqual(
      options.body.options.allowCredentials,
      [],
      "discoverable: the authenticator offers its own",
    );
    assert.equal(options.body.options.userVerification, "required");
    const response = authenticator.get(credential, options.body.options);
    return { client, response, answer: await client.postJson("/login/passkey", { response }) };
  };

  let alicePasskey: SoftCredential;

  test("no passkey is registered while app_url is not set: a clear refusal", async () => {
    const client = await signedInClient("alice@example.org");
    const answer = await client.postJson("/account/passkeys/options", { name: "Laptop", password });
    assert.equal(answer.status, 409);
    assert.equal(answer.body.error, "passkey.no_app_url");
    assert.match(answer.body.message, /app_url/);
    await service.services.settings.update({ app_url: appUrl });
  });

  test("registration needs the password and a name; the answer is stored once, its challenge used up; two-factor is on", async () => {
    const client = await signedInClient("alice@example.org");
    // The CSRF token is required of the JSON endpoints too.
    const forged = await client.postJson("/account/passkeys/options", { name: "x", password }, { csrf: "" });
    assert.equal(forged.status, 403);
    const wrong = await client.postJson("/account/passkeys/options", { name: "Laptop", password: "nope" });
    assert.equal(wrong.status, 422);
    assert.equal(wrong.body.field, "password");
    assert.equal(wrong.body.error, "password.wrong");
    const unnamed = await client.postJson("/account/passkeys/options", { name: "  ", password });
    assert.equal(unnamed.status, 422);
    assert.equal(unnamed.body.field, "name");
    // An answer for another origin (a phishing site) is not stored.
    const options = await client.postJson("/account/passkeys/options", { name: "Laptop", password });
    const phished = authenticator.create(options.body.options, {
      origin: "https://users.example.org.evil.test",
    });
    const refused = await client.postJson("/account/passkeys", {
      name: "Laptop",
      response: phished.response,
    });
    assert.equal(refused.status, 422);
    assert.equal((await passkeyRows("alice@example.org")).length, 0);

    const { credential, response, done } = await register(client, "Laptop");
    assert.equal(done.status, 200, done.text);
    assert.deepEqual(done.body, { redirect: "/account/passkeys" });
    alicePasskey = credential;
    const rows = await passkeyRows("alice@example.org");
    assert.deepEqual(
      rows.map((row) => row.name),
      ["Laptop"],
    );
    const page = await client.get("/account/passkeys");
    assert.match(page.text, /Laptop/);
    assert.match(page.text, /Two-factor authentication is now on/);
    // The same answer again: its challenge is gone.
    const replay = await client.postJson("/account/passkeys", { name: "Again", response });
    assert.equal(replay.status, 422);
    assert.equal(replay.body.error, "passkey.challenge_void");
    assert.equal((await passkeyRows("alice@example.org")).length, 1);
    const events = await eventTypes("alice@example.org");
    assert.ok(events.includes("passkey.added"));
    assert.ok(events.includes("two_factor.enabled"));
  });

  test("the passkey is the second factor at /2fa; an assertion is not taken twice", async () => {
    const client = await atSecondStep("alice@example.org");
    const page = await client.get("/2fa");
    assert.match(page.text, /Use a passkey/);
    assert.doesNotMatch(page.text, /name="code"/, "no code form without TOTP");
    const { response, answer } = await secondFactor(client, alicePasskey);
    assert.equal(answer.status, 200, answer.text);
    assert.deepEqual(answer.body, { redirect: "/account" });
    assert.equal((await client.get("/account")).status, 200);
    const [row] = await passkeyRows("alice@example.org");
    assert.equal(Number(row?.counter), alicePasskey.signCount);
    assert.ok(row?.last_used_at, "last used is recorded");

    // Replayed in another sign-in (a fresh challenge there): the old challenge is used up.
    const other = await atSecondStep("alice@example.org");
    await other.postJson("/2fa/passkey/options", {});
    const replay = await other.postJson("/2fa/passkey", { response });
    assert.equal(replay.status, 401);
    assert.equal((await other.get("/account")).location, "/login");
    const events = await eventTypes("alice@example.org");
    assert.equal(events.at(-1), "second_factor.failed");
  });

  test("another user's passkey: not removed, not accepted as the second factor", async () => {
    const bob = await signedInClient("bob@example.org");
    const { credential, done } = await register(bob, "Bob's key");
    assert.equal(done.status, 200, done.text);
    const [alices] = await passkeyRows("alice@example.org");
    await bob.get("/account/passkeys");
    assert.equal((await bob.get(`/account/passkeys/${alices?.id}/remove`)).status, 404);
    const removal = await bob.post(`/account/passkeys/${alices?.id}/remove`, { password });
    assert.equal(removal.status, 404);
    assert.equal((await passkeyRows("alice@example.org")).length, 1);
    const bobUser = await service.services.users.get("bob@example.org");
    const bobsProof = await service.services.signIn.confirmPassword(bobUser, password, { door: "web" });
    await assert.rejects(service.services.passkeys.remove(bobsProof, Number(alices?.id), byTest), (error) =>
      isRefusal(error, passkeyNotFound),
    );
    // Bob's passkey at Alice's second step.
    const client = await atSecondStep("alice@example.org");
    const { answer } = await secondFactor(client, credential);
    assert.equal(answer.status, 401);
  });

  test("a signature counter going back is refused (a copied passkey) and recorded", async () => {
    const copy: SoftCredential = { ...alicePasskey, signCount: alicePasskey.signCount - 2 };
    const client = await atSecondStep("alice@example.org");
    const { answer } = await secondFactor(client, copy);
    assert.equal(answer.status, 401);
    assert.ok((await eventTypes("alice@example.org")).includes("passkey.cloned"));
    // The genuine one keeps working.
    const genuine = await atSecondStep("alice@example.org");
    assert.equal((await secondFactor(genuine, alicePasskey)).answer.status, 200);
  });

  test("an authenticator without a counter (always 0) signs in each time", async () => {
    const synced = new SoftAuthenticator(appUrl, { counts: false });
    const client = await signedInClient("carol@example.org");
    const options = await client.postJson("/account/passkeys/options", { name: "Synced", password });
    const { credential, response } = synced.create(options.body.options);
    assert.equal((await client.postJson("/account/passkeys", { name: "Synced", response })).status, 200);
    for (let i = 0; i < 2; i++) {
      const step = await atSecondStep("carol@example.org");
      const started = await step.postJson("/2fa/passkey/options", {});
      const answer = await step.postJson("/2fa/passkey", {
        response: synced.get(credential, started.body.options),
      });
      assert.equal(answer.status, 200, answer.text);
    }
    // TOTP on and off again: the passkey keeps two-factor authentication on.
    const { users } = service.services;
    await users.enableTotp("carol@example.org", {}, byTest);
    await users.disableTotp("carol@example.org", byTest);
    assert.ok(!(await eventTypes("carol@example.org")).includes("two_factor.disabled"));
    const step = await atSecondStep("carol@example.org");
    const started = await step.postJson("/2fa/passkey/options", {});
    await step.postJson("/2fa/passkey", { response: synced.get(credential, started.body.options) });
    const page = await step.get("/account/twofactor");
    assert.match(page.text, /Two-factor authentication is on with your passkeys/);
  });

  test("a passkey alone signs in only users who turned it on, active and not spam", async () => {
    const off = await passkeyAlone(alicePasskey);
    assert.equal(off.answer.status, 403);
    assert.equal(off.answer.body.error, "passkey.sign_in_off");
    assert.equal((await off.client.get("/account")).location, "/login");

    const alice = await signedInClient("alice@example.org", alicePasskey);
    assert.equal((await alice.post("/account/passkeys/sign-in", { passkeySignIn: "on" })).status, 303);
    const on = await passkeyAlone(alicePasskey);
    assert.equal(on.answer.status, 200, on.answer.text);
    assert.deepEqual(on.answer.body, { redirect: "/account" });
    assert.equal((await on.client.get("/account")).status, 200, "signed in, no second step");
    // The same answer again: refused.
    const replay = await on.client.postJson("/login/passkey", { response: on.response });
    assert.equal(replay.status, 401);

    // A user must change the password: signed in, and sent there.
    await service.services.users.update("alice@example.org", { passwordChangeRequired: true });
    const change = await passkeyAlone(alicePasskey);
    assert.deepEqual(change.answer.body, { redirect: "/account/password" });
    assert.equal((await change.client.get("/account")).location, "/account/password");
    await service.services.users.update("alice@example.org", { passwordChangeRequired: false });

    await service.services.users.update("alice@example.org", { roles: ["ROLE_SPAM"] });
    const spam = await passkeyAlone(alicePasskey);
    assert.equal(spam.answer.status, 403);
    assert.equal(spam.answer.body.error, "passkey.account_disabled");
    assert.equal((await spam.client.get("/account")).location, "/login");
    await service.services.users.update("alice@example.org", { roles: [] });
    const events = await eventTypes("alice@example.org");
    assert.ok(events.includes("sign_in.failed"));
  });

  test("deletion and reset remove the passkeys; a deleted user's passkey signs nobody in", async () => {
    const dave = await signedInClient("dave@example.org");
    const first = await register(dave, "Phone");
    assert.equal(first.done.status, 200);
    await dave.post("/account/passkeys/sign-in", { passkeySignIn: "on" });
    await service.services.lifecycle.reset("dave@example.org", "a new long password 1", byTest);
    assert.equal((await passkeyRows("dave@example.org")).length, 0);
    const row = await db()
      .selectFrom("users")
      .select("passkey_sign_in")
      .where("email", "=", "dave@example.org")
      .executeTakeFirstOrThrow();
    assert.ok(!row.passkey_sign_in, "passkey sign-in goes off with them");
    assert.equal((await passkeyAlone(first.credential)).answer.status, 401);
    const client = new WebClient(service.url);
    await client.get("/login");
    const answer = await client.post("/login", {
      email: "dave@example.org",
      password: "a new long password 1",
    });
    assert.equal(answer.location, "/account", "no second step after the reset");

    await client.get("/account/passkeys");
    const options = await client.postJson("/account/passkeys/options", {
      name: "Phone",
      password: "a new long password 1",
    });
    const second = authenticator.create(options.body.options);
    assert.equal(
      (await client.postJson("/account/passkeys", { name: "Phone", response: second.response })).status,
      200,
    );
    await client.post("/account/passkeys/sign-in", { passkeySignIn: "on" });
    await service.services.lifecycle.delete("dave@example.org", byTest);
    assert.equal((await passkeyRows("dave@example.org")).length, 0);
    // Refused: 401, or 429 once this test's one client address has failed often enough (a passkey
    // alone is counted per client, never against the passkey's owner).
    const refused = (await passkeyAlone(second.credential)).answer.status;
    assert.ok(refused === 401 || refused === 429, String(refused));
  });

  test("an admin switching two-factor off removes the passkeys too: the owner signs in with the password", async () => {
    const erin = await signedInClient("erin@example.org");
    const made = await register(erin, "Lost phone");
    assert.equal(made.done.status, 200);
    // With a second factor, the page points to app passwords: IMAP and SMTP still take the password.
    const page = await erin.get("/account/passkeys");
    assert.match(page.text, /id="passkeys-mail-apps"/);
    await service.services.appPasswords.setRequired(
      await service.services.users.get("erin@example.org"),
      true,
      byTest,
    );
    assert.doesNotMatch((await erin.get("/account/passkeys")).text, /id="passkeys-mail-apps"/);
    await atSecondStep("erin@example.org");
    const token = await service.token("admin");
    const off = await service.request("DELETE", "/api/admin/users/erin@example.org/totp", { token });
    assert.equal(off.status, 204);
    assert.equal((await passkeyRows("erin@example.org")).length, 0);
    const client = new WebClient(service.url);
    await client.get("/login");
    const answer = await client.post("/login", { email: "erin@example.org", password });
    assert.equal(answer.location, "/account", "no second step any more");
    const types = await eventTypes("erin@example.org");
    assert.equal(types.at(-2), "two_factor.disabled");
  });

  test("sign-in challenges handed to anyone are bounded", async () => {
    const { maxOpenSignInChallenges } = await import("../src/accounts/passkeys.ts");
    const expires = Math.floor(Date.now() / 1000) + 300;
    const rows = Array.from({ length: maxOpenSignInChallenges }, (_, i) => ({
      challenge: `flood-${i}`,
      purpose: "sign_in" as const,
      user_id: null,
      expires_at: expires,
    }));
    for (let i = 0; i < rows.length; i += 500)
      await db()
        .insertInto("passkey_challenges")
        .values(rows.slice(i, i + 500))
        .execute();
    const client = new WebClient(service.url);
    await client.get("/login");
    const refused = await client.postJson("/login/passkey/options", {});
    assert.equal(refused.status, 503);
    await db().deleteFrom("passkey_challenges").where("challenge", "like", "flood-%").execute();
    assert.equal((await client.postJson("/login/passkey/options", {})).status, 200);
  });

  test("removing the last passkey turns two-factor off; sign-in alone is offered only with a passkey", async () => {
    // Wrong answers at /2fa pass the guard: within a few this client is held back (as it should
    // be); then forget them, for the sign-ins below.
    const held = await atSecondStep("alice@example.org");
    const statuses: number[] = [];
    for (let i = 0; i < 12 && statuses.at(-1) !== 429; i++) {
      await held.postJson("/2fa/passkey/options", {});
      statuses.push((await held.postJson("/2fa/passkey", { response: {} })).status);
    }
    assert.equal(statuses.at(-1), 429, statuses.join(","));
    await db().deleteFrom("sign_in_failures").execute();
    const alice = await signedInClient("alice@example.org", alicePasskey);
    const [row] = await passkeyRows("alice@example.org");
    // The password is asked again: without it (or with a wrong one) the form comes back, nothing goes.
    assert.equal((await alice.get(`/account/passkeys/${row?.id}/remove`)).status, 200);
    const unconfirmed = await alice.post(`/account/passkeys/${row?.id}/remove`, {
      password: "not the password",
    });
    assert.equal(unconfirmed.status, 422);
    assert.equal((await passkeyRows("alice@example.org")).length, 1);
    await alice.get(`/account/passkeys/${row?.id}/remove`);
    const removed = await alice.post(`/account/passkeys/${row?.id}/remove`, { password });
    assert.equal(removed.location, "/account/passkeys");
    const page = await alice.get("/account/passkeys");
    assert.match(page.text, /Two-factor authentication is now off/);
    assert.doesNotMatch(page.text, /passkeySignIn/);
    const events = await eventTypes("alice@example.org");
    assert.deepEqual(events.slice(-2), ["passkey.removed", "two_factor.disabled"]);
    const refused = await alice.post("/account/passkeys/sign-in", { passkeySignIn: "on" });
    assert.equal(refused.status, 409);
    const client = new WebClient(service.url);
    await client.signIn("alice@example.org");
  });
});
