import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Browser } from "playwright-core";
import {
  browserUnavailable,
  fillByLabel,
  launchBrowser,
  newContextPage,
  screenshot,
  seriousViolations,
  signOutOnPage,
  submitSignIn,
} from "../helpers/browser.ts";
import { password } from "../helpers/fixtures.ts";
import { startService, type TestService } from "../helpers/service.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

describe("web: first-run setup on an empty database (real Chromium)", { skip: skip ?? false }, () => {
  let service: TestService;
  let browser: Browser;

  before(async () => {
    service = await startService({ web: true });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await service?.close();
  });

  test("domain, administrator and settings in three steps; then postmaster signs in", async () => {
    const { context, page } = await newContextPage(browser);
    await page.goto(`${service.url}/`);
    await page.waitForURL(`${service.url}/init`);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "init-domain");
    await fillByLabel(page, "Set-up code", "WRON-GCOD-EWRO-NGCO");
    await fillByLabel(page, "Domain name", "Example.COM");
    await page.getByRole("button", { name: "Continue" }).click();
    assert.match(await page.locator("#field-setupCode-error").innerText(), /not the set-up code/);
    await fillByLabel(page, "Set-up code", (await service.services.setup.openSetupCode()) ?? "");
    await fillByLabel(page, "Domain name", "not a domain");
    await page.getByRole("button", { name: "Continue" }).click();
    assert.match(await page.locator("#field-domain-error").innerText(), /not a valid domain name/);
    await fillByLabel(page, "Set-up code", (await service.services.setup.openSetupCode()) ?? "");
    await fillByLabel(page, "Domain name", "Example.COM");
    await page.getByRole("button", { name: "Continue" }).click();
    // Step 2 follows on the same answer, the code carried along (no second typing).
    await page.getByRole("heading", { name: "Step 2 of 3: the administrator" }).waitFor();
    assert.match(await page.locator("main").innerText(), /postmaster@example\.com/);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "init-user");
    await fillByLabel(page, "Password", password);
    await fillByLabel(page, "Repeat password", "something else entirely");
    await page.getByRole("button", { name: "Continue" }).click();
    assert.match(await page.locator("#field-passwordRepeat-error").innerText(), /do not match/);
    await fillByLabel(page, "Password", password);
    await fillByLabel(page, "Repeat password", password);
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL(`${service.url}/init/settings`);
    assert.equal(
      await page.getByLabel("Address of this web interface").inputValue(),
      "https://users.example.com",
    );
    assert.equal(await page.getByLabel("Sender address of e-mails").inputValue(), "noreply@example.com");
    assert.equal(
      await page.getByLabel("Where mail to postmaster@ of every domain goes").inputValue(),
      "postmaster@example.com",
    );
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "init-settings");
    await fillByLabel(page, "Name of this service", "Example Mail");
    await fillByLabel(page, "Project web site", "not a url");
    await page.getByRole("button", { name: "Save settings" }).click();
    assert.match(await page.locator("#field-project_url-error").innerText(), /https:\/\//);
    assert.deepEqual(await seriousViolations(page), []);
    await fillByLabel(page, "Project web site", "https://example.com");
    await page.getByLabel("Mailbox encryption (MailCrypt)").selectOption("3");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.waitForURL(`${service.url}/account`);
    assert.match(await page.locator(".flash").innerText(), /The service is set up\./);
    assert.equal(await service.services.settings.get("app_name"), "Example Mail");
    assert.equal(await service.services.settings.get("mail_crypt"), 3);

    await signOutOnPage(page);
    await page.goto(`${service.url}/init`);
    await page.waitForURL(`${service.url}/`);
    await submitSignIn(page, "postmaster", password);
    await page.waitForURL(`${service.url}/account`);
    assert.match(await page.locator("main").innerText(), /Signed in as postmaster@example\.com/);
    const admin = await service.services.users.get("postmaster@example.com");
    assert.ok(admin.roles.includes("ROLE_ADMIN"));
    assert.ok(admin.mailCryptPublicKey, "MailCrypt level 3 made the admin's keys at its first sign-in");
    await context.close();
  });
});
