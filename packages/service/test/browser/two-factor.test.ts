import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Browser } from "playwright-core";
import { currentTotpCode } from "../../src/credentials/totp.ts";
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
import { password } from "../helpers/fixtures.ts";
import { startService, type TestService } from "../helpers/service.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

describe("web: two-factor enrolment, sign-in with TOTP and backup codes, switching off (real Chromium)", {
  skip: skip ?? false,
}, () => {
  let service: TestService;
  let browser: Browser;

  before(async () => {
    service = await startService({ web: true });
    browser = await launchBrowser();
    const { domains, users, settings } = service.services;
    await domains.create("example.org");
    await settings.update({ project_name: "Example Mail" });
    for (const email of ["alice@example.org", "bob@example.org"])
      await users.create({ email, password, mailCrypt: false });
  });
  after(async () => {
    await browser?.close();
    await service?.close();
  });

  test("enrol with the password, the QR code and a code; the backup codes need the acknowledgement; TOTP and a backup code sign in once each", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "alice@example.org", password);
    await page.getByRole("link", { name: "Two-factor authentication" }).click();
    await page.waitForURL(`${service.url}/account/twofactor`);
    assert.match(await page.locator("main").innerText(), /Two-factor authentication is off/);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "twofactor");

    // A wrong password: the reason next to the field, nothing offered.
    await fillByLabel(page, "Confirm with your password", "not the password");
    await page.getByRole("button", { name: "Set up two-factor authentication" }).click();
    assert.match(await page.locator(".field.has-error .error").innerText(), /Wrong password/);
    assert.equal(page.url(), `${service.url}/account/twofactor/enable`);
    assert.deepEqual(await seriousViolations(page), []);
    await fillByLabel(page, "Confirm with your password", password);
    await page.getByRole("button", { name: "Set up two-factor authentication" }).click();
    await page.waitForURL(`${service.url}/account/twofactor/confirm`);

    const secret = (await page.locator("#totp-secret").innerText()).replace(/\s+/g, "");
    assert.match(secret, /^[A-Z2-7]{52}$/);
    assert.ok(!page.url().includes(secret), "the secret is not in the URL");
    const uri = await page.locator("#totp-uri").textContent();
    assert.equal(uri, `otpauth://totp/alice%40example.org?secret=${secret}&issuer=Example%20Mail`);
    const qr = await page.locator(".qr img").getAttribute("src");
    assert.match(qr ?? "", /^data:image\/svg\+xml;base64,/);
    const svg = Buffer.from((qr ?? "").split(",")[1] ?? "", "base64").toString();
    assert.match(svg, /^<svg[\s\S]*<\/svg>\s*$/, "a QR code rendered on the server as SVG");
    assert.ok(
      await page
        .locator(".qr img")
        .evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth > 0),
    );
    // Offered, not yet on: the user signs in without a second factor until the code confirms it.
    const offered = await service.services.users.get("alice@example.org");
    assert.equal(offered.totpConfirmed, false);
    assert.equal(offered.totpSecret, null);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "twofactor-confirm");

    await fillByLabel(page, "Verification code", "000000");
    await page.getByRole("button", { name: "Turn on" }).click();
    assert.match(await page.locator(".field.has-error .error").innerText(), /verification code is not valid/);
    assert.deepEqual(await seriousViolations(page), []);
    const code = currentTotpCode(secret, Date.now());
    await fillByLabel(page, "Verification code", code);
    await page.getByRole("button", { name: "Turn on" }).click();

    const codes = await page.locator("#backup-codes li").allInnerTexts();
    assert.equal(codes.length, 6);
    for (const backup of codes) assert.match(backup, /^\d{6}$/);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "twofactor-backup-codes");
    const enabled = await service.services.users.get("alice@example.org");
    assert.equal(enabled.totpConfirmed, true);
    assert.equal(enabled.totpSecret, secret);
    assert.equal(enabled.totpBackupCodes.length, 6);
    for (const stored of enabled.totpBackupCodes)
      assert.match(stored, /^\$hmac-sha256\$/, "stored as a keyed hash");
    assert.ok(enabled.totpLastStep !== null, "the confirming code is recorded as used");

    await page.getByRole("button", { name: "Continue" }).click();
    assert.match(await page.locator(".field.has-error .error").innerText(), /needs to be checked/);
    assert.deepEqual(await page.locator("#backup-codes li").allInnerTexts(), codes);
    assert.deepEqual(await seriousViolations(page), []);
    await page.getByLabel("I have stored the backup codes in a safe place.").check();
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL(`${service.url}/account/twofactor`);
    assert.match(await page.locator(".flash").innerText(), /now on/);
    assert.match(await page.locator("main").innerText(), /Two-factor authentication is on/);
    await signOutOnPage(page);

    // The code that confirmed the enrolment cannot be replayed at the next sign-in.
    await signInOnPage(page, service.url, "alice@example.org", password, { expect: "2fa" });
    await submitSecondFactor(page, code);
    assert.match(await page.locator(".error").innerText(), /verification code is not valid/);
    // The next step's code is new (the window takes one step either side).
    const next = currentTotpCode(secret, Date.now() + 30_000);
    await submitSecondFactor(page, next);
    await page.waitForURL(`${service.url}/account`);
    await signOutOnPage(page);

    // A backup code works once.
    const backup = codes[0]!;
    await signInOnPage(page, service.url, "alice@example.org", password, { expect: "2fa" });
    await submitSecondFactor(page, backup);
    await page.waitForURL(`${service.url}/account`);
    assert.equal((await service.services.users.get("alice@example.org")).totpBackupCodes.length, 5);
    await signOutOnPage(page);
    await signInOnPage(page, service.url, "alice@example.org", password, { expect: "2fa" });
    await submitSecondFactor(page, backup);
    assert.match(await page.locator(".error").innerText(), /verification code is not valid/);
    await submitSecondFactor(page, codes[1]!);
    await page.waitForURL(`${service.url}/account`);

    // Switching off needs the password and clears the backup codes too.
    await page.goto(`${service.url}/account/twofactor`);
    assert.deepEqual(await seriousViolations(page), []);
    await fillByLabel(page, "Confirm with your password", "not the password");
    await page.getByRole("button", { name: "Turn off two-factor authentication" }).click();
    assert.match(await page.locator(".field.has-error .error").innerText(), /Wrong password/);
    assert.equal((await service.services.users.get("alice@example.org")).totpConfirmed, true);
    await fillByLabel(page, "Confirm with your password", password);
    await page.getByRole("button", { name: "Turn off two-factor authentication" }).click();
    await page.waitForURL(`${service.url}/account/twofactor`);
    assert.match(await page.locator(".flash").innerText(), /now off/);
    const off = await service.services.users.get("alice@example.org");
    assert.equal(off.totpConfirmed, false);
    assert.equal(off.totpSecret, null);
    assert.deepEqual(off.totpBackupCodes, []);
    await signOutOnPage(page);
    await signInOnPage(page, service.url, "alice@example.org", password);
    await context.close();
    // Every page of this suite comes from 127.0.0.1: forget its failures.
    await service.services.database.db.deleteFrom("sign_in_failures").execute();
  });

  test("enrolling ends the other sessions (they were opened without the second factor); an offer expires; the German page and 375 px", async () => {
    const other = await newContextPage(browser);
    await signInOnPage(other.page, service.url, "bob@example.org", password);
    const { context, page } = await newContextPage(browser, { width: 375 });
    await signInOnPage(page, service.url, "bob@example.org", password);
    await page.goto(`${service.url}/account/twofactor`);
    await fillByLabel(page, "Confirm with your password", password);
    await page.getByRole("button", { name: "Set up two-factor authentication" }).click();
    await page.waitForURL(`${service.url}/account/twofactor/confirm`);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "twofactor-confirm-375");

    // The offer lives in the session row; an old one is void and the user starts again.
    const { db } = service.services.database;
    const row = await db
      .selectFrom("web_sessions")
      .innerJoin("users", "users.id", "web_sessions.user_id")
      .select(["web_sessions.id_hash", "web_sessions.data"])
      .where("users.email", "=", "bob@example.org")
      .where("web_sessions.data", "like", "%totpPending%")
      .executeTakeFirstOrThrow();
    const data = JSON.parse(row.data);
    const secret = data.totpPending.secret as string;
    data.totpPending.offeredAt -= 3600;
    await db
      .updateTable("web_sessions")
      .set({ data: JSON.stringify(data) })
      .where("id_hash", "=", row.id_hash)
      .execute();
    await fillByLabel(page, "Verification code", currentTotpCode(secret, Date.now()));
    await page.getByRole("button", { name: "Turn on" }).click();
    await page.waitForURL(`${service.url}/account/twofactor`);
    assert.match(await page.locator(".flash").innerText(), /took too long/);
    assert.equal((await service.services.users.get("bob@example.org")).totpConfirmed, false);

    await page.goto(`${service.url}/account/twofactor?lang=de`);
    assert.equal(await page.locator("h1").innerText(), "Zwei-Faktor-Authentifizierung");
    await fillByLabel(page, "Mit deinem Passwort bestätigen", password);
    await page.getByRole("button", { name: "Zwei-Faktor-Authentifizierung einrichten" }).click();
    await page.waitForURL(`${service.url}/account/twofactor/confirm`);
    const fresh = (await page.locator("#totp-secret").innerText()).replace(/\s+/g, "");
    assert.notEqual(fresh, secret);
    await fillByLabel(page, "Bestätigungscode", currentTotpCode(fresh, Date.now()));
    await page.getByRole("button", { name: "Einschalten" }).click();
    assert.equal(await page.locator("h1").innerText(), "Deine Backup-Codes");
    assert.deepEqual(await seriousViolations(page), []);

    await other.page.goto(`${service.url}/account`);
    assert.equal(other.page.url(), `${service.url}/login`, "the session without the second factor ended");
    await page.goto(`${service.url}/account`);
    assert.equal(page.url(), `${service.url}/account`, "the session that enrolled stays");
    await other.context.close();
    await context.close();
  });
});
