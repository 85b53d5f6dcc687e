import assert from "node:assert/strict";
import { createPrivateKey, createPublicKey } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Browser, Page } from "playwright-core";
import { openSecretBox } from "../../src/credentials/mailcrypt.ts";
import { createLogger } from "../../src/logger.ts";
import { MailWorker } from "../../src/mail/sender.ts";
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
} from "../helpers/browser.ts";
import { password } from "../helpers/fixtures.ts";
import { type Receiver, startReceiver } from "../helpers/receiver.ts";
import { startService, type TestService } from "../helpers/service.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../helpers/smtp-receiver.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

const day = 86400;
const newPassword = "my very own long passphrase";

describe("web: registration with an invite code, and invite codes (real Chromium, real SMTP)", {
  skip: skip ?? false,
}, () => {
  let service: TestService;
  let relay: SmtpReceiver;
  let hooks: Receiver;
  let mailWorker: MailWorker;
  let browser: Browser;
  let mailboxToken: string;

  before(async () => {
    relay = await startSmtpReceiver();
    hooks = await startReceiver();
    service = await startService({ web: true, serviceOptions: { smtpUrl: relay.url } });
    const { domains, users, settings, webhooks } = service.services;
    await settings.update({ app_url: service.url, app_name: "Example Mail", project_name: "Example" });
    mailWorker = new MailWorker(service.services.database.db, createLogger("silent"), relay.url, {
      pollIntervalMs: 50,
    });
    mailWorker.start();
    browser = await launchBrowser();
    mailboxToken = await service.token("mailbox-server");
    await domains.create("example.org");
    await domains.updateInvitations("example.org", { enabled: true, limit: 3, waitingPeriodDays: 7 });
    await domains.create("closed.org");
    await webhooks.create({ url: hooks.url, events: ["user.created"], secret: "s".repeat(32) });
    await users.create({ email: "alice@example.org", password, mailCrypt: false });
    await users.create({ email: "bob@closed.org", password, mailCrypt: false });
    await users.create({ email: "eve@example.org", password, roles: ["ROLE_MULTIPLIER"], mailCrypt: false });
  });
  after(async () => {
    await mailWorker?.stop();
    await browser?.close();
    await service?.close();
    await relay?.close();
    await hooks?.close();
  });

  const fillRegistration = async (page: Page, localPart: string, pass = newPassword) => {
    await fillByLabel(page, "E-mail address", localPart);
    await fillByLabel(page, "Password", pass);
    await fillByLabel(page, "Repeat password", pass);
    await page.getByRole("button", { name: "Register" }).click();
    await page.waitForLoadState();
  };

  test("register with an invite code: reasons next to the field, the token once, the welcome page and e-mail, user.created; then sign-in and passdb work and the code is spent", async () => {
    const code = await service.services.inviteCodes.create({
      domain: "example.org",
      owner: "alice@example.org",
    });
    const { context, page } = await newContextPage(browser);
    await page.goto(`${service.url}/`);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "start");
    await fillByLabel(page, "Invite code", "nope42");
    await page.getByRole("button", { name: "Continue" }).click();
    assert.match(
      await page.locator("#field-inviteCode-error").innerText(),
      /This invite code cannot be used/,
    );
    assert.deepEqual(await seriousViolations(page), []);
    await fillByLabel(page, "Invite code", code.code.toLowerCase());
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL(`${service.url}/register/${code.code}`);
    assert.match(await page.locator(".domain-suffix").innerText(), /^@example\.org$/);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "register");

    await fillRegistration(page, "PostMaster");
    assert.match(
      await page.locator("#field-localPart-error").innerText(),
      /The e-mail address is already taken\./,
      "a reserved name, whatever its case",
    );
    assert.equal(await page.getByLabel("E-mail address").getAttribute("aria-invalid"), "true");
    assert.deepEqual(await seriousViolations(page), []);
    await fillRegistration(page, "alice");
    assert.match(
      await page.locator("#field-localPart-error").innerText(),
      /already taken/,
      "a taken address",
    );
    await fillRegistration(page, "a+b");
    assert.match(await page.locator("#field-localPart-error").innerText(), /unexpected characters/);
    await fillRegistration(page, "newbie", "too short");
    assert.match(await page.locator("#field-password-error").innerText(), /at least 12 characters/);
    assert.equal(await service.services.users.findByEmail("newbie@example.org"), null, "nothing written yet");

    await fillRegistration(page, "NewBie");
    const token = await page.locator("#recovery-token").innerText();
    assert.match(token, /^[0-9a-f-]{36}$/);
    assert.ok(!page.url().includes(token), "the token is not in the URL");
    assert.deepEqual(await seriousViolations(page), []);
    await page.getByRole("button", { name: "Continue" }).click();
    assert.match(await page.locator(".error").innerText(), /needs to be checked/);
    await page.getByLabel("I have stored the recovery token in a safe place.").check();
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL(`${service.url}/register/welcome`);
    assert.equal(await page.locator("h1").innerText(), "Welcome to Example!");
    assert.match(await page.locator(".flash").innerText(), /You are now registered\./);
    assert.match(await page.locator("main").innerText(), /newbie@example\.org/);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "register-welcome");

    const user = await service.services.users.get("newbie@example.org");
    assert.equal(user.lastLoginTime, null, "registering is not signing in");
    assert.ok((await openSecretBox(user.recoverySecretBox!, token, service.services.pool)).length > 100);
    const [welcome] = await relay.waitFor(1);
    assert.deepEqual(welcome?.envelopeTo, ["newbie@example.org"]);
    assert.equal(welcome?.subject, "Welcome to Example");
    assert.ok(welcome?.text.includes(`${service.url}/account/voucher`), welcome?.text);
    assert.ok(!welcome?.text.includes(token));
    const deliveries = new DeliveryWorker(service.services.database.db, createLogger("silent"), {
      retryDelays: [1],
      timeoutMs: 2000,
    });
    await deliveries.runOnce();
    // The accounts made before this test announced themselves too: find the new one's.
    const received = (await hooks.waitFor(1)).map((d) => JSON.parse(d.body.toString()));
    const created = received.find((p) => p.data.email === "newbie@example.org");
    assert.equal(created?.type, "user.created");

    await signOutOnPage(page);
    await signInOnPage(page, service.url, "newbie", newPassword);
    assert.match(await page.locator("main").innerText(), /Signed in as newbie@example\.org/);
    const passdb = await service.request("POST", "/api/mailbox-server/newbie@example.org", {
      token: mailboxToken,
      json: { password: newPassword },
    });
    assert.equal(passdb.status, 200, passdb.text);
    const userdb = await service.request("GET", "/api/mailbox-server/newbie@example.org", {
      token: mailboxToken,
    });
    const privatePem = Buffer.from(passdb.body.body.mailCryptPrivateKey, "base64").toString();
    const derived = createPublicKey(createPrivateKey(privatePem)).export({ type: "spki", format: "pem" });
    assert.equal(derived, Buffer.from(userdb.body.body.mailCryptPublicKey, "base64").toString());
    await context.close();

    // The code is spent: its link and the start page's form both say it cannot be used (as for
    // an unknown code: the answer does not tell which).
    const other = await newContextPage(browser);
    await other.page.goto(`${service.url}/register/${code.code}`);
    await other.page.waitForURL(`${service.url}/?notice=inviteInvalid`);
    assert.match(await other.page.locator("main").innerText(), /This invite code cannot be used/);
    await fillByLabel(other.page, "Invite code", code.code);
    await other.page.getByRole("button", { name: "Continue" }).click();
    assert.match(
      await other.page.locator("#field-inviteCode-error").innerText(),
      /This invite code cannot be used/,
    );
    assert.deepEqual(await seriousViolations(other.page), []);
    await other.context.close();
  });

  test("a code of a domain that does not invite cannot be used, like any other; the registration page fits 375 px", async () => {
    const closed = await service.services.inviteCodes.create({
      domain: "closed.org",
      owner: "bob@closed.org",
    });
    const open = await service.services.inviteCodes.create({
      domain: "example.org",
      owner: "alice@example.org",
    });
    const { context, page } = await newContextPage(browser, { width: 375 });
    await page.goto(`${service.url}/register/${closed.code}`);
    await page.waitForURL(`${service.url}/?notice=inviteInvalid`);
    assert.match(await page.locator("main").innerText(), /This invite code cannot be used/);
    assert.deepEqual(await seriousViolations(page), []);
    await page.goto(`${service.url}/register/${open.code}`);
    // A string, evaluated in the page: the test's own code has no DOM types.
    const width = await page.evaluate<number>("document.documentElement.scrollWidth");
    assert.ok(width <= 375, `no sideways scrolling at 375 px (${width})`);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "register-375");
    await context.close();
  });

  test("/account/voucher: nothing is handed out by looking; 'Get my invite codes' hands out the domain's limit once; a multiplier creates more", async () => {
    const eve = await service.services.users.get("eve@example.org");
    await service.services.database.db
      .updateTable("users")
      .set({ created_at: Math.floor(Date.now() / 1000) - 8 * day })
      .where("id", "=", eve.id)
      .execute();
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "eve@example.org", password);
    await page.getByRole("link", { name: "Invite codes" }).click();
    await page.waitForURL(`${service.url}/account/voucher`);
    assert.match(await page.locator("main").innerText(), /You have no unused invite codes\./);
    assert.match(await page.locator("main").innerText(), /You can get 3 invite codes now\./);
    assert.deepEqual(await seriousViolations(page), []);
    await page.reload();
    assert.equal(
      (await service.services.inviteCodes.unredeemedOf(eve.id)).length,
      0,
      "looking hands out nothing",
    );
    await page.getByRole("button", { name: "Get my invite codes" }).click();
    await page.waitForURL(`${service.url}/account/voucher`);
    assert.match(await page.locator(".flash").innerText(), /You got 3 new invite codes\./);
    const links = await page.locator("td a").allInnerTexts();
    assert.equal(links.length, 3);
    for (const link of links)
      assert.match(link, new RegExp(`^${service.url}/register/[2-9A-HJKMNP-Z]{5}(-[2-9A-HJKMNP-Z]{5}){3}$`));
    assert.match(await page.locator("main").innerText(), /received all 3 invite codes/);
    assert.equal(await page.getByRole("button", { name: "Get my invite codes" }).count(), 0);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "vouchers");
    await page.getByRole("button", { name: "Create invite code" }).click();
    await page.waitForURL(`${service.url}/account/voucher`);
    assert.match(await page.locator(".flash").innerText(), /New invite code created\./);
    assert.equal(await page.locator("td a").count(), 4);
    // A link works as is.
    const first = links[0]!;
    await page.goto(first);
    assert.equal(await page.locator("h1").innerText(), "Create your e-mail account");
    await context.close();

    const closed = await newContextPage(browser);
    await signInOnPage(closed.page, service.url, "bob@closed.org", password);
    assert.equal(await closed.page.getByRole("link", { name: "Invite codes" }).count(), 0);
    await closed.page.goto(`${service.url}/account/voucher`);
    assert.match(
      await closed.page.locator("main").innerText(),
      /Invitations are turned off for your domain\./,
    );
    assert.deepEqual(await seriousViolations(closed.page), []);
    await closed.context.close();
  });
});
