import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Browser, CDPSession, Page } from "playwright-core";
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
import { startService, type TestService } from "../helpers/service.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

/** WebAuthn needs a secure context and a domain as RP id: a name under localhost, mapped to the service. */
const host = "passkeys.localhost";

/** A credential as the DevTools WebAuthn domain hands it out and takes it back. */
interface VirtualCredential {
  credentialId: string;
  isResidentCredential: boolean;
  rpId?: string;
  privateKey: string;
  userHandle?: string;
  signCount: number;
}

/** Chromium's virtual authenticator on this page (a platform authenticator with user verification). */
async function virtualAuthenticator(page: Page): Promise<{ cdp: CDPSession; authenticatorId: string }> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("WebAuthn.enable", { enableUI: false });
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return { cdp, authenticatorId };
}

describe("web: passkeys with Chromium's virtual authenticator (real Chromium)", {
  skip: skip ?? false,
}, () => {
  let service: TestService;
  let browser: Browser;
  let base: string;

  before(async () => {
    service = await startService({ web: true });
    const port = new URL(service.url).port;
    base = `http://${host}:${port}`;
    browser = await launchBrowser([`--host-resolver-rules=MAP ${host} 127.0.0.1`]);
    const { domains, users, settings } = service.services;
    await domains.create("example.org");
    await settings.update({ app_name: "Example Mail", app_url: base });
    await users.create({ email: "alice@example.org", password, mailCrypt: false });
  });
  after(async () => {
    await browser?.close();
    await service?.close();
  });

  const events = async (type: string) =>
    (
      await service.services.database.db
        .selectFrom("security_events")
        .select("id")
        .where("email", "=", "alice@example.org")
        .where("type", "=", type)
        .execute()
    ).length;

  test("register, the passkey as second factor, the passkey alone, a copy refused, remove; no JavaScript needed for the password", async () => {
    const { context, page } = await newContextPage(browser);
    const { cdp, authenticatorId } = await virtualAuthenticator(page);
    await signInOnPage(page, base, "alice@example.org", password);

    // Linked from the two-factor page; the CSP stays as it was (our script is a file of our own).
    await page.goto(`${base}/account/twofactor`);
    await page.getByRole("link", { name: "Passkeys" }).click();
    await page.waitForURL(`${base}/account/passkeys`);
    const answer = await page.reload();
    assert.equal(
      answer?.headers()["content-security-policy"],
      "default-src 'self';img-src 'self' data:;script-src 'self';style-src 'self';object-src 'none';base-uri 'self';frame-ancestors 'none';form-action 'self'",
    );
    assert.match(await page.locator("main").innerText(), /You have no passkey yet/);
    assert.equal(await page.getByText("Adding a passkey needs JavaScript").isVisible(), false);

    await fillByLabel(page, "Passkey name", "Laptop");
    await fillByLabel(page, "Confirm with your password", "not the password");
    await page.getByRole("button", { name: "Add passkey" }).click();
    await page.getByRole("alert").filter({ hasText: "Wrong password" }).waitFor();
    assert.equal(await page.getByLabel("Confirm with your password").getAttribute("aria-invalid"), "true");
    await fillByLabel(page, "Confirm with your password", password);
    await page.getByRole("button", { name: "Add passkey" }).click();
    await page.locator(".flash").filter({ hasText: "Two-factor authentication is now on" }).waitFor();
    assert.deepEqual(await page.locator("#passkeys tbody td:first-child").allInnerTexts(), ["Laptop"]);
    assert.match(await page.locator("#passkeys tbody").innerText(), /never/);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "passkeys");
    const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
    assert.equal(credentials.length, 1);
    assert.equal(credentials[0]?.isResidentCredential, true, "discoverable");
    assert.equal(credentials[0]?.rpId, host, "the RP id is app_url's host name");

    // The second step of a password sign-in: the passkey instead of a code.
    await signOutOnPage(page);
    await signInOnPage(page, base, "alice@example.org", password, { expect: "2fa" });
    await page.getByRole("button", { name: "Use a passkey" }).click();
    await page.waitForURL(`${base}/account`);
    assert.equal(await events("passkey.added"), 1);

    // Signing in with the passkey alone: refused until it is turned on.
    await signOutOnPage(page);
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await page.getByRole("alert").filter({ hasText: "not turned on for this account" }).waitFor();
    await signInOnPage(page, base, "alice@example.org", password, { expect: "2fa" });
    await page.getByRole("button", { name: "Use a passkey" }).click();
    await page.waitForURL(`${base}/account`);
    await page.goto(`${base}/account/passkeys`);
    await page.getByLabel("Sign in with a passkey alone").check();
    await page.getByRole("button", { name: "Save" }).click();
    await page.locator(".flash").filter({ hasText: "Saved" }).waitFor();
    assert.match(await page.locator("main").innerText(), /Signing in with a passkey alone is on/);
    await signOutOnPage(page);
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await page.waitForURL(`${base}/account`);
    await page.goto(`${base}/account/passkeys`);
    assert.doesNotMatch(await page.locator("#passkeys tbody").innerText(), /never/, "last used is shown");

    // A copy of the credential whose counter is behind the one last seen: refused, recorded.
    const [original] = (await cdp.send("WebAuthn.getCredentials", { authenticatorId }))
      .credentials as VirtualCredential[];
    assert.ok(original && original.signCount >= 2, `the authenticator counts (${original?.signCount})`);
    const copy = await newContextPage(browser);
    const copied = await virtualAuthenticator(copy.page);
    await copied.cdp.send("WebAuthn.addCredential", {
      authenticatorId: copied.authenticatorId,
      credential: { ...original, signCount: 0 },
    });
    await copy.page.goto(`${base}/login`);
    await copy.page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await copy.page.getByRole("alert").filter({ hasText: "could not sign you in" }).waitFor();
    assert.equal(copy.page.url(), `${base}/login`);
    assert.equal(await events("passkey.cloned"), 1);
    await copy.context.close();

    // Remove it: the last second factor, so two-factor authentication is off again.
    await page.goto(`${base}/account/passkeys`);
    await page.getByRole("link", { name: "Remove passkey Laptop" }).click();
    await page.getByLabel("Confirm with your password").fill(password);
    await page.getByRole("button", { name: "Remove" }).click();
    await page.locator(".flash").filter({ hasText: "Two-factor authentication is now off" }).waitFor();
    assert.match(await page.locator("main").innerText(), /You have no passkey yet/);
    assert.equal(await events("passkey.removed"), 1);
    await signOutOnPage(page);
    await signInOnPage(page, base, "alice@example.org", password);
    await context.close();

    // Without JavaScript: no passkey button, and the password sign-in works as ever.
    const noScript = await browser.newContext({ javaScriptEnabled: false, locale: "en-GB" });
    const plain = await noScript.newPage();
    await plain.goto(`${base}/login`);
    assert.equal(await plain.getByRole("button", { name: "Sign in with a passkey" }).count(), 0);
    await signInOnPage(plain, base, "alice@example.org", password);
    await plain.goto(`${base}/account/passkeys`);
    assert.equal(await plain.getByText("Adding a passkey needs JavaScript").isVisible(), true);
    assert.equal(await plain.getByRole("button", { name: "Add passkey" }).count(), 0);
    await noScript.close();
  });
});
