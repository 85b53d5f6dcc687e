import assert from "node:assert/strict";
import { createPrivateKey, createPublicKey } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Browser, Page } from "playwright-core";
import { openSecretBox } from "../../src/credentials/mailcrypt.ts";
import { createLogger } from "../../src/logger.ts";
import { MailWorker } from "../../src/mail/sender.ts";
import {
  browserUnavailable,
  fillByLabel,
  launchBrowser,
  newContextPage,
  screenshot,
  seriousViolations,
  signInOnPage,
} from "../helpers/browser.ts";
import { byTest, password } from "../helpers/fixtures.ts";
import { startService, type TestService } from "../helpers/service.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../helpers/smtp-receiver.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

const day = 86400;
const newPassword = "a new and rather long passphrase 42";

describe("web: recovery with the recovery token (real Chromium, real SMTP)", { skip: skip ?? false }, () => {
  let service: TestService;
  let relay: SmtpReceiver;
  let worker: MailWorker;
  let browser: Browser;
  let mailboxToken: string;
  const tokens: Record<string, string> = {};

  before(async () => {
    relay = await startSmtpReceiver();
    service = await startService({ web: true, serviceOptions: { smtpUrl: relay.url } });
    await service.services.settings.update({ app_url: service.url, app_name: "Example Mail" });
    worker = new MailWorker(service.services.database.db, createLogger("silent"), relay.url, {
      pollIntervalMs: 50,
    });
    worker.start();
    browser = await launchBrowser();
    mailboxToken = await service.token("mailbox-server");
    const { domains, users } = service.services;
    await domains.create("example.org");
    for (const email of ["erin@example.org", "frank@example.org"]) {
      const created = await users.create({ email, password, mailCrypt: true });
      tokens[email] = created.recoveryToken ?? "";
    }
    await users.enableTotp("erin@example.org", {}, byTest);
  });
  after(async () => {
    await worker?.stop();
    await browser?.close();
    await service?.close();
    await relay?.close();
  });

  const now = () => Math.floor(Date.now() / 1000);
  const setStart = (email: string, start: number | null) =>
    service.services.database.db
      .updateTable("users")
      .set({ recovery_start_time: start })
      .where("email", "=", email)
      .execute();
  const row = (email: string) =>
    service.services.database.db
      .selectFrom("users")
      .selectAll()
      .where("email", "=", email)
      .executeTakeFirstOrThrow();
  /** Address and token on /recovery; nothing of them may show up in a URL. */
  const submitRecovery = async (page: Page, email: string, token: string, button = "Continue") => {
    await page.goto(`${service.url}/recovery`);
    await fillByLabel(page, /^(E-mail address|E-Mail-Adresse)$/, email);
    await fillByLabel(page, /^(Recovery token|Wiederherstellungscode)$/, token);
    await page.getByRole("button", { name: button }).click();
    await page.waitForLoadState();
    assert.equal(page.url(), `${service.url}/recovery`, "nothing in the URL");
  };
  test("starting a recovery sends 'recovery started' to the account and shows when the next step opens", async () => {
    const { context, page } = await newContextPage(browser);
    await page.goto(`${service.url}/login`);
    await page.getByRole("link", { name: /Use your recovery token/ }).click();
    await page.waitForURL(`${service.url}/recovery`);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "recovery");
    const before = now();
    // Upper case is the same token (the reference failed on it at the last step: its bug 6).
    await submitRecovery(page, "erin@example.org", (tokens["erin@example.org"] ?? "").toUpperCase());
    const main = await page.locator("main").innerText();
    assert.match(main, /Recovery started/);
    assert.match(main, /We have sent an e-mail about it to the account/);
    assert.match(main, /You can set the new password from \d{1,2} \w{3} \d{4}, \d{2}:\d{2} UTC on/);
    assert.deepEqual(await seriousViolations(page), []);
    const start = (await row("erin@example.org")).recovery_start_time ?? 0;
    assert.ok(start >= before && start <= now());

    const [mail] = await relay.waitFor(1);
    assert.ok(mail);
    assert.deepEqual(mail.envelopeTo, ["erin@example.org"]);
    assert.equal(mail.subject, "The password for your e-mail account erin@example.org will be reset");
    assert.equal(mail.from, "Example Mail <admin@example.org>");
    assert.ok(mail.text.includes(`${service.url}/recovery\n`), mail.text);
    assert.ok(mail.text.includes(`${service.url}/account/recovery-token\n`));
    assert.ok(!mail.text.toLowerCase().includes(tokens["erin@example.org"] ?? "-"), "no token in the e-mail");

    // Asked again during the wait: the same answer in the visitor's language, no second e-mail.
    const german = await newContextPage(browser, { locale: "de-DE" });
    await submitRecovery(german.page, "erin@example.org", tokens["erin@example.org"] ?? "", "Weiter");
    const text = await german.page.locator("main").innerText();
    assert.match(text, /Das neue Passwort kannst du ab \d{2}\.\d{2}\.\d{4}, \d{2}:\d{2} UTC setzen/);
    assert.doesNotMatch(text, /E-Mail geschickt/);
    assert.deepEqual(await seriousViolations(german.page), []);
    await german.context.close();
    assert.equal(
      (await service.services.database.db.selectFrom("mail_outbox").selectAll().execute()).length,
      1,
    );
    await context.close();
  });

  test("after the waiting period: a new password that opens the same key, 2FA off, sessions ended, a new token", async () => {
    const email = "erin@example.org";
    const oldSession = await newContextPage(browser);
    await signInOnPage(oldSession.page, service.url, email, password, { expect: "2fa" });
    await setStart(email, now() - 2 * day - 60);

    const { context, page } = await newContextPage(browser);
    await submitRecovery(page, email, tokens[email] ?? "");
    assert.match(await page.locator("h1").innerText(), /Set a new password/);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "recovery-new-password");
    await fillByLabel(page, "New password", newPassword);
    await fillByLabel(page, "Repeat new password", newPassword);
    await page.getByRole("button", { name: "Set new password" }).click();
    await page.waitForLoadState();
    assert.equal(page.url(), `${service.url}/recovery/reset`, "nothing in the URL");
    assert.deepEqual(await seriousViolations(page), []);
    const newToken = (await page.locator("#recovery-token").innerText()).trim();
    assert.match(newToken, /^[0-9a-f-]{36}$/);
    assert.notEqual(newToken, tokens[email]);
    // Going on without the acknowledgement is refused.
    await page.getByRole("button", { name: "Continue" }).click();
    assert.match(await page.locator(".error").innerText(), /This needs to be checked/);
    await page.getByLabel("I have stored the recovery token in a safe place.").check();
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL(`${service.url}/recovery/done`);
    assert.deepEqual(await seriousViolations(page), []);

    // passdb with the new password returns the key whose public half userdb publishes.
    const passdb = await service.request("POST", `/api/mailbox-server/${email}`, {
      token: mailboxToken,
      json: { password: newPassword },
    });
    assert.equal(passdb.status, 200);
    const userdb = await service.request("GET", `/api/mailbox-server/${email}`, { token: mailboxToken });
    const privateKey: string = passdb.body.body.mailCryptPrivateKey;
    const derived = createPublicKey(createPrivateKey(Buffer.from(privateKey, "base64").toString())).export({
      type: "spki",
      format: "pem",
    });
    assert.equal(derived, Buffer.from(userdb.body.body.mailCryptPublicKey, "base64").toString());
    const old = await service.request("POST", `/api/mailbox-server/${email}`, {
      token: mailboxToken,
      json: { password },
    });
    assert.equal(old.status, 401);

    const stored = await row(email);
    assert.equal(stored.totp_secret, null);
    assert.equal(Number(stored.totp_confirmed), 0);
    assert.equal(stored.totp_backup_codes, "[]");
    assert.equal(stored.recovery_start_time, null);
    // The new token opens the new recovery box, which holds the same key.
    assert.equal(
      await openSecretBox(stored.recovery_secret_box ?? "", newToken, service.services.pool),
      privateKey,
    );

    await oldSession.page.goto(`${service.url}/2fa`);
    assert.equal(oldSession.page.url(), `${service.url}/login`, "the earlier session was ended");
    await oldSession.context.close();

    // The old token is useless now; the new password signs in without a second factor.
    await submitRecovery(page, email, tokens[email] ?? "");
    assert.match(await page.locator("main").innerText(), /e-mail address or the recovery token is wrong/);
    await signInOnPage(page, service.url, email, newPassword);
    await context.close();
    await service.services.database.db.deleteFrom("sign_in_failures").execute();
  });

  test("a wrong token, an unknown address and an expired recovery are refused", async () => {
    const email = "frank@example.org";
    const { context, page } = await newContextPage(browser);
    await submitRecovery(page, email, "00000000-0000-4000-8000-000000000000");
    const wrong = await page.locator("[role=alert]").innerText();
    assert.match(wrong, /The e-mail address or the recovery token is wrong/);
    assert.deepEqual(await seriousViolations(page), []);
    await submitRecovery(page, "nobody@example.org", tokens[email] ?? "");
    assert.equal(await page.locator("[role=alert]").innerText(), wrong);
    await submitRecovery(page, email, "not-a-token");
    assert.match(await page.locator(".error").innerText(), /This token has an invalid format/);
    await submitRecovery(page, "frank", tokens[email] ?? "");
    assert.match(await page.locator(".error").innerText(), /full e-mail address/);
    assert.equal((await row(email)).recovery_start_time, null, "nothing started");

    // Ready, but 31 days old when the new password arrives: refused, password unchanged.
    await setStart(email, now() - 3 * day);
    await submitRecovery(page, email, tokens[email] ?? "");
    assert.match(await page.locator("h1").innerText(), /Set a new password/);
    await setStart(email, now() - 31 * day);
    await fillByLabel(page, "New password", newPassword);
    await fillByLabel(page, "Repeat new password", newPassword);
    await page.getByRole("button", { name: "Set new password" }).click();
    await page.waitForLoadState();
    assert.match(await page.locator("[role=alert]").innerText(), /This recovery has expired/);
    assert.deepEqual(await seriousViolations(page), []);
    const passdb = await service.request("POST", `/api/mailbox-server/${email}`, {
      token: mailboxToken,
      json: { password },
    });
    assert.equal(passdb.status, 200, "the old password still works");

    // Asking again restarts the waiting period and tells the account again.
    relay.received.length = 0;
    await submitRecovery(page, email, tokens[email] ?? "");
    assert.match(await page.locator("main").innerText(), /Recovery started/);
    const [mail] = await relay.waitFor(1);
    assert.deepEqual(mail?.envelopeTo, [email]);
    assert.ok(((await row(email)).recovery_start_time ?? 0) > now() - 60);
    await context.close();
    await service.services.database.db.deleteFrom("sign_in_failures").execute();
  });

  test("repeated wrong tokens are throttled", async () => {
    const { context, page } = await newContextPage(browser);
    for (let i = 0; i < 5; i++)
      await submitRecovery(page, "frank@example.org", "00000000-0000-4000-8000-00000000000" + i);
    await submitRecovery(page, "frank@example.org", tokens["frank@example.org"] ?? "");
    assert.match(
      await page.locator("[role=alert]").innerText(),
      /Too many failed attempts\. Please wait \d+ seconds?/,
    );
    await context.close();
    await service.services.database.db.deleteFrom("sign_in_failures").execute();
  });
});
