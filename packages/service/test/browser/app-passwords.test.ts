import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Browser, Page } from "playwright-core";
import {
  browserUnavailable,
  fillByLabel,
  launchBrowser,
  newContextPage,
  screenshot,
  seriousViolations,
  sidewaysOverflow,
  signInOnPage,
} from "../helpers/browser.ts";
import { password } from "../helpers/fixtures.ts";
import { startService, type TestService } from "../helpers/service.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

describe("web: app passwords (real Chromium)", { skip: skip ?? false }, () => {
  let service: TestService;
  let browser: Browser;
  let mailbox: string;

  before(async () => {
    service = await startService({ web: true });
    browser = await launchBrowser();
    mailbox = await service.token("mailbox-server");
    const { domains, users } = service.services;
    await domains.create("example.org");
    await users.create({ email: "alice@example.org", password, mailCrypt: true });
  });
  after(async () => {
    await browser?.close();
    await service?.close();
  });

  const passdb = (secret: string) =>
    service.request("POST", "/api/mailbox-server/alice%40example.org", {
      token: mailbox,
      json: { password: secret },
      headers: { "x-client-address": "203.0.113.5" },
    });

  /** Fills the create form and sends it; the caller waits for what follows. */
  const create = async (page: Page, name: string, scope: RegExp, confirm = password) => {
    await fillByLabel(page, "Device name", name);
    await page.getByLabel(scope).check();
    await fillByLabel(page, "Your current password", confirm);
    await page.getByRole("button", { name: "Create app password" }).click();
  };

  /** The shown-once page: the value, then "I have put it into my mail app" and on to the list. */
  const takeShown = async (page: Page): Promise<string> => {
    const value = await page.locator("#app-password").innerText();
    assert.match(value, /^[a-z2-9]{4}(-[a-z2-9]{4}){3}$/);
    assert.deepEqual(await seriousViolations(page), []);
    // Without the box: the same value again, and the reason next to the box.
    await page.getByRole("button", { name: "Continue" }).click();
    assert.match(await page.locator("#field-ack-error").innerText(), /cannot be shown again/);
    assert.equal(await page.locator("#app-password").innerText(), value);
    await page.getByLabel(/I have put this app password into my mail app/).check();
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL(`${service.url}/account/app-passwords`);
    return value;
  };

  test("create one from the account page, see it once, use it, then revoke it", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "alice@example.org", password);
    await page.getByRole("link", { name: "App passwords" }).click();
    await page.waitForURL(`${service.url}/account/app-passwords`);
    assert.match(await page.locator("#app-passwords-none").innerText(), /no app passwords yet/);
    assert.deepEqual(await seriousViolations(page), []);

    // A wrong password: the form again, the reason under the password, the name kept.
    await create(page, "Phone", /^Mail: IMAP and SMTP$/, "not my password at all");
    assert.match(await page.locator("#field-password-error").innerText(), /./);
    assert.equal(await page.locator("#field-name").inputValue(), "Phone");
    assert.deepEqual(await seriousViolations(page), []);

    await create(page, "Phone", /^Mail: IMAP and SMTP$/);
    await page.locator("#app-password").waitFor();
    assert.match(await page.locator("main, body").first().innerText(), /dashes are optional/);
    const phone = await takeShown(page);
    assert.match(await page.locator(".flash-success").innerText(), /“Phone” is ready/);
    assert.equal((await passdb(phone)).status, 200, "it opens the mailbox");

    await create(page, "Printer", /Sending only \(SMTP\)/);
    await page.locator("#app-password").waitFor();
    await takeShown(page);
    const rows = page.locator("#app-passwords tbody tr");
    assert.equal(await rows.count(), 2);
    assert.match(await rows.nth(0).innerText(), /Phone\s+Mail \(IMAP, SMTP\)/);
    assert.match(await rows.nth(0).innerText(), /from 203\.0\.113\.5/);
    assert.match(await rows.nth(1).innerText(), /Printer\s+Sending only \(SMTP\)\s+.*Never/s);
    assert.ok(!(await page.content()).includes(phone), "the list never shows a value");
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "app-passwords");

    await page.getByRole("button", { name: "Revoke the app password “Phone”" }).click();
    await page.waitForURL(`${service.url}/account/app-passwords`);
    assert.match(await page.locator(".flash-success").innerText(), /“Phone” is revoked/);
    assert.equal(await rows.count(), 1);
    assert.match(await rows.nth(0).innerText(), /Printer/);
    assert.equal((await passdb(phone)).status, 401, "revoked: refused at once");

    // The switch, with the effective value.
    const box = page.getByLabel("Mail apps must use app passwords");
    assert.equal(await box.isChecked(), false);
    await box.check();
    await page.getByRole("button", { name: "Save" }).click();
    await page.waitForURL(`${service.url}/account/app-passwords`);
    assert.equal(await page.getByLabel("Mail apps must use app passwords").isChecked(), true);
    assert.equal((await passdb(password)).status, 401, "the account password no longer opens the mailbox");
    await context.close();
  });

  test("the page fits 375 px, with a name of 64 characters, and is translated", async () => {
    const { context, page } = await newContextPage(browser, { width: 375 });
    await signInOnPage(page, service.url, "alice@example.org", password);
    await page.goto(`${service.url}/account/app-passwords`);
    await create(page, "Thelaptopofthefamilyinthelivingroomnexttotheprinterandthescanner", /Sending only/);
    await page.locator("#app-password").waitFor();
    assert.deepEqual((await sidewaysOverflow(page)).overflow, 0);
    await takeShown(page);
    const { overflow, culprits } = await sidewaysOverflow(page);
    assert.equal(overflow, 0, culprits.join("; "));
    assert.deepEqual(await seriousViolations(page), []);
    await page.goto(`${service.url}/account/app-passwords?lang=de`);
    assert.match(await page.locator("h1").innerText(), /App-Passwörter/);
    assert.equal((await sidewaysOverflow(page)).overflow, 0);
    await context.close();
  });
});
