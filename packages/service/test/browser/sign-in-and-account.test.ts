import assert from "node:assert/strict";
import { createPrivateKey, createPublicKey } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Browser } from "playwright-core";
import { currentTotpCode } from "../../src/credentials/totp.ts";
import { createLogger } from "../../src/logger.ts";
import { DeliveryWorker } from "../../src/webhooks/worker.ts";
import {
  browserUnavailable,
  fillByLabel,
  launchBrowser,
  newContextPage,
  screenshot,
  seriousViolations,
  signInOnPage,
  signOutOnPage,
  submitSecondFactor,
} from "../helpers/browser.ts";
import { byTest, password } from "../helpers/fixtures.ts";
import { type Receiver, startReceiver } from "../helpers/receiver.ts";
import { startService, type TestService } from "../helpers/service.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

describe("web: sign-in, second factor and the account pages (real Chromium)", { skip: skip ?? false }, () => {
  let service: TestService;
  let browser: Browser;
  let mailboxToken: string;

  before(async () => {
    service = await startService({ web: true });
    browser = await launchBrowser();
    mailboxToken = await service.token("mailbox-server");
    const { domains, users } = service.services;
    await domains.create("example.org");
    for (const email of ["alice@example.org", "bob@example.org", "carol@example.org", "dave@example.org"])
      await users.create({ email, password, mailCrypt: true });
    await users.create({ email: "spam@example.org", password, roles: ["ROLE_SPAM"] });
    await users.create({ email: "change@example.org", password, passwordChangeRequired: true });
  });
  after(async () => {
    await browser?.close();
    await service?.close();
  });

  test("the sign-in page is accessible, sets no session before sign-in and signs in with a local part", async () => {
    const { context, page } = await newContextPage(browser);
    const response = await page.goto(`${service.url}/login`);
    const csp = response?.headers()["content-security-policy"] ?? "";
    for (const directive of [
      "default-src 'self'",
      "img-src 'self' data:",
      "frame-ancestors 'none'",
      "form-action 'self'",
    ])
      assert.ok(csp.includes(directive), `CSP has ${directive}: ${csp}`);
    assert.ok(!csp.includes("unsafe-inline"));
    assert.equal(response?.headers()["referrer-policy"], "same-origin");
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "login");
    assert.ok(!(await context.cookies()).some((c) => c.name === "session"));
    await signInOnPage(page, service.url, "alice", password);
    assert.match(await page.locator("main").innerText(), /Signed in as alice@example\.org/);
    const session = (await context.cookies()).find((c) => c.name === "session");
    assert.ok(session?.httpOnly);
    assert.equal(session?.sameSite, "Lax");
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "account");
    const row = await service.services.users.get("alice@example.org");
    assert.ok(row.lastLoginTime, "a sign-in without a second factor is recorded at once");
    await context.close();
  });

  test("a wrong password and an unknown address get the same answer; repeated failures are throttled", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "bob@example.org", "wrong password!!", { expect: "none" });
    const wrong = await page.locator(".error").innerText();
    await signInOnPage(page, service.url, "nobody@example.org", "wrong password!!", { expect: "none" });
    assert.equal(await page.locator(".error").innerText(), wrong);
    assert.match(wrong, /e-mail address or the password is wrong/);
    for (let i = 0; i < 4; i++)
      await signInOnPage(page, service.url, "bob@example.org", "wrong password!!", { expect: "none" });
    await signInOnPage(page, service.url, "bob@example.org", password, { expect: "none" });
    assert.match(
      await page.locator(".error").innerText(),
      /Too many failed sign-ins\. Please wait \d+ seconds?/,
    );
    assert.equal(page.url(), `${service.url}/login`);
    await context.close();
    // Every page of this suite comes from 127.0.0.1: forget its failures so the next tests sign in.
    await service.services.database.db.deleteFrom("sign_in_failures").execute();
  });

  test("two-factor sign-in: the last login is recorded after the code, and a code is accepted once", async () => {
    const { secret } = await service.services.users.enableTotp("carol@example.org", {}, byTest);
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "carol@example.org", password, { expect: "2fa" });
    assert.deepEqual(await seriousViolations(page), []);
    assert.equal((await service.services.users.get("carol@example.org")).lastLoginTime, null);
    assert.equal((await page.goto(`${service.url}/account`))?.url(), `${service.url}/login`);
    await page.goto(`${service.url}/2fa`);
    const code = currentTotpCode(secret, Date.now());
    await submitSecondFactor(page, code);
    await page.waitForURL(`${service.url}/account`);
    assert.ok((await service.services.users.get("carol@example.org")).lastLoginTime);
    await signOutOnPage(page);
    await signInOnPage(page, service.url, "carol@example.org", password, { expect: "2fa" });
    await submitSecondFactor(page, code);
    assert.match(await page.locator(".error").innerText(), /verification code is not valid/);
    await context.close();
  });

  test("a password change re-seals the key: passdb with the new password opens the key userdb publishes; other sessions end", async () => {
    const other = await newContextPage(browser);
    await signInOnPage(other.page, service.url, "dave@example.org", password);
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "dave@example.org", password, { expect: "none" });
    await page.goto(`${service.url}/account/password`);
    assert.deepEqual(await seriousViolations(page), []);
    await fillByLabel(page, "Current password", password);
    await fillByLabel(page, "New password", "short");
    await fillByLabel(page, "Repeat new password", "short");
    await page.getByRole("button", { name: "Change password" }).click();
    assert.match(await page.locator(".error").innerText(), /at least 12 characters/);
    const newPassword = "a brand new passphrase";
    await fillByLabel(page, "Current password", password);
    await fillByLabel(page, "New password", newPassword);
    await fillByLabel(page, "Repeat new password", newPassword);
    await page.getByRole("button", { name: "Change password" }).click();
    await page.waitForURL(`${service.url}/account`);
    assert.match(await page.locator(".flash").innerText(), /new password is now active/);

    const passdb = await service.request("POST", "/api/mailbox-server/dave@example.org", {
      token: mailboxToken,
      json: { password: newPassword },
    });
    assert.equal(passdb.status, 200);
    const userdb = await service.request("GET", "/api/mailbox-server/dave@example.org", {
      token: mailboxToken,
    });
    const privatePem = Buffer.from(passdb.body.body.mailCryptPrivateKey, "base64").toString();
    const derived = createPublicKey(createPrivateKey(privatePem)).export({ type: "spki", format: "pem" });
    assert.equal(derived, Buffer.from(userdb.body.body.mailCryptPublicKey, "base64").toString());

    await other.page.goto(`${service.url}/account`);
    assert.equal(other.page.url(), `${service.url}/login`, "the other session was ended");
    await page.goto(`${service.url}/account`);
    assert.equal(page.url(), `${service.url}/account`, "the session that changed it stays");
    await other.context.close();
    await context.close();
  });

  test("a form posted without its CSRF token is refused and changes nothing", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "alice@example.org", password);
    const before = (await service.services.users.get("alice@example.org")).passwordHash;
    const answer = await page.request.post(`${service.url}/account/password`, {
      form: {
        currentPassword: password,
        newPassword: "another long password",
        newPasswordRepeat: "another long password",
      },
    });
    assert.equal(answer.status(), 403);
    assert.match(await answer.text(), /form has expired/);
    assert.equal((await service.services.users.get("alice@example.org")).passwordHash, before);
    await context.close();
  });

  test("a user who must change the password is sent to the password page from everywhere; spam users see the locked page", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "change@example.org", password, { expect: "none" });
    await page.waitForURL(`${service.url}/account/password`);
    await page.goto(`${service.url}/account/delete`);
    assert.equal(page.url(), `${service.url}/account/password`);
    await page.getByRole("button", { name: "Sign out" }).click();
    await signInOnPage(page, service.url, "spam@example.org", password);
    assert.match(await page.locator("h1").innerText(), /Account locked/);
    await context.close();
  });

  test("a new recovery token is shown once and opens the recovery box; sign out everywhere ends every session", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "alice@example.org", password, { expect: "none" });
    await page.goto(`${service.url}/account/recovery-token`);
    await fillByLabel(page, "Password", password);
    await page.getByRole("button", { name: "Create a new recovery token" }).click();
    const token = await page.locator("#recovery-token").innerText();
    assert.match(token, /^[0-9a-f-]{36}$/);
    assert.ok(!page.url().includes(token), "the token is not in the URL");
    assert.deepEqual(await seriousViolations(page), []);
    await page.getByRole("button", { name: "Continue" }).click();
    assert.match(await page.locator(".error").innerText(), /needs to be checked/);
    await page.getByLabel("I have stored the recovery token in a safe place.").check();
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL(`${service.url}/account`);
    const { openSecretBox } = await import("../../src/credentials/mailcrypt.ts");
    const user = await service.services.users.get("alice@example.org");
    const opened = await openSecretBox(user.recoverySecretBox!, token, service.services.pool);
    assert.ok(opened.length > 100);

    // The new recovery token is on the account's activity page, which is as accessible as the rest.
    await page.goto(`${service.url}/account`);
    await page.getByRole("link", { name: "Account activity" }).click();
    await page.waitForURL(`${service.url}/account/activity`);
    assert.match(await page.locator("#activity").innerText(), /New recovery token created/);
    assert.deepEqual(await seriousViolations(page), []);

    await page.goto(`${service.url}/account/sessions`);
    await page.getByRole("button", { name: "Sign out everywhere" }).click();
    await page.waitForURL(/\/login/);
    const left = await service.services.database.db
      .selectFrom("web_sessions")
      .selectAll()
      .where("user_id", "=", user.id)
      .execute();
    assert.equal(left.length, 0);
    await page.goto(`${service.url}/account`);
    assert.equal(page.url(), `${service.url}/login`);
    await context.close();
  });

  test("German from Accept-Language and from the switcher", async () => {
    const { context, page } = await newContextPage(browser, { locale: "de-DE" });
    await page.goto(`${service.url}/login`);
    assert.equal(await page.locator("h1").innerText(), "Anmelden");
    assert.equal(await page.locator("html").getAttribute("lang"), "de");
    await page.getByRole("link", { name: "English", exact: true }).click();
    assert.equal(await page.locator("h1").innerText(), "Sign in");
    await context.close();
  });

  test("deleting the account on the page deletes it through the one deletion path (webhook) and signs out", async () => {
    const receiver: Receiver = await startReceiver();
    try {
      await service.services.webhooks.create({
        url: receiver.url,
        events: ["user.deleted"],
        secret: "s".repeat(32),
      });
      const { context, page } = await newContextPage(browser);
      await signInOnPage(page, service.url, "bob@example.org", password);
      await page.goto(`${service.url}/account/delete`);
      assert.deepEqual(await seriousViolations(page), []);
      await fillByLabel(page, "Confirm with your password", password);
      await page.getByRole("button", { name: "Delete my account" }).click();
      await page.waitForURL(/\/login\?notice=deleted/);
      const worker = new DeliveryWorker(service.services.database.db, createLogger("silent"), {
        retryDelays: [1],
        timeoutMs: 2000,
      });
      await worker.runOnce();
      const [delivery] = await receiver.waitFor(1);
      const payload = JSON.parse(delivery!.body.toString());
      assert.equal(payload.type, "user.deleted");
      assert.equal(payload.data.email, "bob@example.org");
      await context.close();
    } finally {
      await receiver.close();
    }
  });
});
