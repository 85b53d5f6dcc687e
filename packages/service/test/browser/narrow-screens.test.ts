import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as openpgp from "openpgp";
import type { Browser, Page } from "playwright-core";
import { checkAddress, checkDomain } from "../../src/accounts/address-syntax.ts";
import { currentTotpCode } from "../../src/credentials/totp.ts";
import { insertReturningId } from "../../src/db/insert.ts";
import {
  browserUnavailable,
  fillByLabel,
  launchBrowser,
  newContextPage,
  screenshot,
  sidewaysOverflow,
  signInOnPage,
  signOutOnPage,
  submitSecondFactor,
} from "../helpers/browser.ts";
import { byTest, password } from "../helpers/fixtures.ts";
import { startService, type TestService } from "../helpers/service.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

const width = 375;

/** A DNS label of `length` letters (no hyphen: nothing a browser would break a line at). */
const label = (word: string, length: number) => word.repeat(Math.ceil(length / word.length)).slice(0, length);
/** A domain of exactly `length` characters: labels of 63 and the rest, then ".org" (checked in `before`). */
function domainOf(word: string, length: number): string {
  const labels: string[] = [];
  let left = length - ".org".length;
  while (left > 0) {
    const next = Math.min(63, left - (labels.length > 0 ? 1 : 0));
    labels.push(label(word, next));
    left -= next + (labels.length > 1 ? 1 : 0);
  }
  return `${labels.join(".")}.org`;
}
/** A local part of exactly 64 characters, the most address-syntax.ts allows. */
const localOf = (start: string) => start.padEnd(64, "x");

// The longest address the rules allow: 64 characters before the "@", 254 in all, so its domain
// has 189; and the longest domain (253), which can hold no address at all.
const addressDomain = domainOf("associationofsubscribers", 189);
const longDomain = domainOf("averylongdomainname", 253);
const person = `${localOf("newslettersubscriptions2026")}@${addressDomain}`;
const admin = `${localOf("administratorofthislongdomain")}@${addressDomain}`;
const recovering = `${localOf("someonewhoforgotthepassword")}@${addressDomain}`;
const enrolling = `${localOf("someonewhoturnsontwofactor")}@${addressDomain}`;
const leaving = `${localOf("someonewhoisdeletedandrestored")}@${addressDomain}`;
const domainAdmin = `${localOf("theadministratorofonlythisdomain")}@${addressDomain}`;
const adminAlias = `${localOf("newsletterteamforallmembers")}@${addressDomain}`;
const hookUrl = `https://hooks.${addressDomain}/${"receive".repeat(20)}?token=${"t".repeat(60)}`;
const tokenName = `token-of-the-${"integration".repeat(5)}`.slice(0, 64);
const reservedName = "postmasterandhostmasterandwebmasterofalltheselongdomains";

/**
 * Every page of the web interface at 375 px (a small phone), filled with the longest values the
 * rules allow: no page may scroll sideways. The pages are the ones the other browser suites reach
 * (public, account as a user and after 2FA, admin as an admin and a domain admin, the first start),
 * reached with long data, including the pages shown once after a POST (tokens, backup codes) and
 * the flash of a new alias; a last test checks that no GET page of the web plugin was left out.
 */
describe(`web: every page fits ${width} px with the longest addresses, domains and tokens (real Chromium)`, {
  skip: skip ?? false,
}, () => {
  let service: TestService;
  let browser: Browser;
  const getPages = new Set<string>();
  const checked = new Set<string>();
  let recoveryToken = "";
  let inviteCode = "";
  let endpointId = "";

  before(async () => {
    for (const address of [person, admin, domainAdmin, recovering, enrolling, leaving, adminAlias]) {
      const check = checkAddress(address, "new");
      assert.ok(check.ok && address.length === 254, address);
    }
    assert.ok(checkDomain(longDomain, "new").ok && longDomain.length === 253);
    service = await startService({
      web: true,
      onWebRoute: (route) => {
        if ([route.method].flat().includes("GET")) getPages.add(route.url);
      },
    });
    browser = await launchBrowser();
    const { domains, users, aliases, webhooks, settings, inviteCodes, reservedNames, tokens, openPgpKeys } =
      service.services;
    await settings.update({ app_name: "Example Mail", app_url: service.url });
    // First, so every account below leaves a delivery (with its long address) in the log.
    const { endpoint } = await webhooks.create({ url: hookUrl, events: ["user.created", "user.deleted"] });
    endpointId = String(endpoint.id);
    await domains.create(addressDomain);
    await domains.create(longDomain);
    await domains.updateInvitations(addressDomain, { enabled: true, limit: 3, waitingPeriodDays: 7 });
    await users.create({ email: admin, password, roles: ["ROLE_ADMIN"] });
    await users.create({ email: domainAdmin, password, roles: ["ROLE_DOMAIN_ADMIN"] });
    await users.create({ email: person, password, mailCrypt: true });
    await users.create({ email: enrolling, password });
    await users.create({ email: leaving, password });
    recoveryToken =
      (await users.create({ email: recovering, password, mailCrypt: true })).recoveryToken ?? "";
    await aliases.create({ source: adminAlias, destinations: [person, admin], owner: person });
    inviteCode = (await inviteCodes.create({ domain: addressDomain, owner: person })).code;
    await reservedNames.create(reservedName);
    await tokens.create(tokenName, ["mailbox-server"]);
    const { publicKey } = await openpgp.generateKey({ userIDs: [{ email: person }], format: "armored" });
    await openPgpKeys.import(person, publicKey);
  });
  after(async () => {
    await browser?.close();
    await service?.close();
  });

  /** Pages that scroll sideways, each with what reaches past the window; the test reports them all at its end. */
  let overflowing: string[] = [];
  /** The page as it is now fits the window: nothing scrolls sideways. */
  const fits = async (page: Page, where = decodeURIComponent(new URL(page.url()).pathname)) => {
    const { overflow, culprits } = await sidewaysOverflow(page);
    if (overflow > 0) overflowing.push(`${where.slice(0, 60)}: ${overflow}px, ${culprits.join("; ")}`);
    checked.add(new URL(page.url()).pathname);
  };
  const noneOverflowed = () => {
    const found = overflowing;
    overflowing = [];
    assert.deepEqual(found, [], `pages that scroll sideways at ${width} px`);
  };
  /** Opens a page (answering 200), then checks it. */
  const visit = async (page: Page, path: string, status = 200) => {
    const answer = await page.goto(`${service.url}${path}`);
    assert.equal(answer?.status(), status, path);
    await fits(page, path);
    checked.add(path.split("?")[0] ?? path);
  };
  const at = (address: string) => encodeURIComponent(address);
  /** Ticks "I have stored …" under what is shown once (a token, backup codes) and goes on. */
  const acknowledge = async (page: Page, stored: RegExp) => {
    await page.getByLabel(stored).check();
    await page.getByRole("button", { name: "Continue" }).click();
  };

  test("the public pages, the sign-in, the recovery, the registration with an invite code", async () => {
    const { context, page } = await newContextPage(browser, { width });
    for (const path of ["/", "/login", "/recovery", "/register", "/no-such-page"])
      await visit(page, path, path === "/no-such-page" ? 404 : 200);
    // A refused sign-in with the longest address in the field.
    await page.goto(`${service.url}/login`);
    await fillByLabel(page, "E-mail address", person);
    await fillByLabel(page, "Password", "not the password");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.locator(".error").first().waitFor();
    await fits(page, "/login refused");

    // Recovery: started (the address named), then after the wait the new password, then done.
    const submitRecovery = async () => {
      await page.goto(`${service.url}/recovery`);
      await fillByLabel(page, "E-mail address", recovering);
      await fillByLabel(page, "Recovery token", recoveryToken);
      await page.getByRole("button", { name: "Continue" }).click();
      await page.waitForLoadState();
    };
    await submitRecovery();
    assert.ok((await page.locator("main").innerText()).includes(recovering));
    await fits(page, "/recovery started");
    await service.services.database.db
      .updateTable("users")
      .set({ recovery_start_time: Math.floor(Date.now() / 1000) - 3 * 86400 })
      .where("email", "=", recovering)
      .execute();
    await submitRecovery();
    await fits(page, "/recovery new password");
    const fresh = "a new and rather long passphrase 42";
    await fillByLabel(page, "New password", fresh);
    await fillByLabel(page, "Repeat new password", fresh);
    await page.getByRole("button", { name: "Set new password" }).click();
    await page.locator("#recovery-token").waitFor();
    await fits(page, "/recovery/reset (the new token)");
    await acknowledge(page, /I have stored the recovery token/);
    await page.waitForURL(/\/recovery\/done|\/login|\/account/);
    await fits(page, "after the recovery");
    await context.close();

    // Registration with an invite code on the domain of the longest address.
    const visitor = await newContextPage(browser, { width });
    await visit(visitor.page, `/register/${inviteCode}`);
    await fillByLabel(visitor.page, "E-mail address", "a".repeat(32));
    await fillByLabel(visitor.page, "Password", "too short");
    await fillByLabel(visitor.page, "Repeat password", "too short");
    await visitor.page.getByRole("button", { name: "Register" }).click();
    await visitor.page.locator(".error").first().waitFor();
    await fits(visitor.page, "/register refused");
    await fillByLabel(visitor.page, "Password", password);
    await fillByLabel(visitor.page, "Repeat password", password);
    await visitor.page.getByRole("button", { name: "Register" }).click();
    await visitor.page.locator("#recovery-token").waitFor();
    await fits(visitor.page, "/register (the recovery token)");
    await acknowledge(visitor.page, /I have stored the recovery token/);
    await visitor.page.waitForURL(`${service.url}/register/welcome`);
    await fits(visitor.page);
    noneOverflowed();
    await visitor.context.close();
  });

  test("every account page of the longest address, with the flash of a new alias", async () => {
    const { context, page } = await newContextPage(browser, { width });
    await signInOnPage(page, service.url, person, password);
    await fits(page);
    for (const path of [
      "/account/password",
      "/account/recovery-token",
      "/account/sessions",
      "/account/activity",
      "/account/delete",
      "/account/twofactor",
      "/account/alias",
      "/account/openpgp",
      `/account/openpgp/delete/${at(person)}`,
      "/account/voucher",
      "/account/app-passwords",
    ])
      await visit(page, path);
    // The passkeys page with the longest name in its list (a row as a registration leaves it; taken
    // out again, so the later sign-ins of this address need no second step).
    const { db } = service.services.database;
    const { id: userId } = await service.services.users.get(person);
    const passkeyId = await insertReturningId(db, "passkeys", {
      user_id: userId,
      credential_id: "narrow-screens",
      public_key: "AA",
      name: "A laptop with a long name someone gave it to tell it apart: 64ch",
      created_at: Math.floor(Date.now() / 1000),
    });
    await visit(page, "/account/passkeys");
    await visit(page, `/account/passkeys/${passkeyId}/remove`);
    await db.deleteFrom("passkeys").where("user_id", "=", userId).execute();

    // The flash of the issue: "Your new alias newsletter.subscriptions.2026@… is ready."
    await page.goto(`${service.url}/account/alias`);
    await fillByLabel(page, "Alias name", "newsletter.subscriptions.2026");
    await page.getByRole("button", { name: "Create custom alias" }).click();
    await page.waitForURL(`${service.url}/account/alias`);
    const flash = await page.locator(".flash").first().innerText();
    assert.equal(flash, `Your new alias newsletter.subscriptions.2026@${addressDomain} is ready.`);
    await fits(page, "/account/alias with the flash of a custom alias");
    await screenshot(page, "aliases-long-address-375");
    await page.getByRole("button", { name: "Create a random alias" }).click();
    await page.waitForURL(`${service.url}/account/alias`);
    await fits(page, "/account/alias with the flash of a random alias");

    // A new recovery token, shown once.
    await page.goto(`${service.url}/account/recovery-token`);
    await fillByLabel(page, /password/i, password);
    await page.getByRole("button", { name: /recovery token/i }).click();
    await page.locator("#recovery-token").waitFor();
    await fits(page, "/account/recovery-token (the new token)");

    // An app password with the longest name (64 characters), shown once, then listed (the admin page lists it too).
    await page.goto(`${service.url}/account/app-passwords`);
    await fillByLabel(
      page,
      "Device name",
      "Thelaptopofthefamilyinthelivingroomnexttotheprinterandthescanner",
    );
    await page.getByLabel(/Sending only/).check();
    await fillByLabel(page, "Your current password", password);
    await page.getByRole("button", { name: "Create app password" }).click();
    await page.locator("#app-password").waitFor();
    await fits(page, "/account/app-passwords (the new app password)");
    await acknowledge(page, /I have put this app password into my mail app/);
    await page.waitForURL(`${service.url}/account/app-passwords`);
    await fits(page, "/account/app-passwords with an app password");
    await context.close();

    // Two-factor enrolment: the secret and its otpauth URI hold the longest address.
    const second = await newContextPage(browser, { width });
    await signInOnPage(second.page, service.url, enrolling, password);
    await second.page.goto(`${service.url}/account/twofactor`);
    await fillByLabel(second.page, "Confirm with your password", password);
    await second.page.getByRole("button", { name: "Set up two-factor authentication" }).click();
    await second.page.waitForURL(`${service.url}/account/twofactor/confirm`);
    await fits(second.page);
    const secret = (await second.page.locator("#totp-secret").innerText()).replace(/\s+/g, "");
    await fillByLabel(second.page, "Verification code", currentTotpCode(secret, Date.now()));
    await second.page.getByRole("button", { name: "Turn on" }).click();
    await second.page.locator("#backup-codes").waitFor();
    await fits(second.page, "/account/twofactor (the backup codes)");
    await acknowledge(second.page, /I have stored the backup codes/);
    await second.page.waitForURL(`${service.url}/account/twofactor`);
    await fits(second.page, "/account/twofactor on");
    await signOutOnPage(second.page);
    await signInOnPage(second.page, service.url, enrolling, password, { expect: "2fa" });
    await fits(second.page);
    await submitSecondFactor(second.page, "000000");
    await second.page.locator(".error").first().waitFor();
    await fits(second.page, "/2fa refused");
    noneOverflowed();
    await second.context.close();
  });

  test("every admin page, with the longest address, alias, domain, token and webhook URL", async () => {
    const { context, page } = await newContextPage(browser, { width });
    await signInOnPage(page, service.url, admin, password);
    const [delivery] = (
      await service.services.webhooks.deliveries(Number(endpointId), { limit: 1, offset: 0 })
    ).items;
    await service.services.lifecycle.delete(leaving, byTest);
    const [token] = await service.services.tokens.list();
    const paths = [
      "/admin",
      "/admin/users",
      "/admin/users?status=all",
      "/admin/users/new",
      `/admin/users/${at(person)}`,
      `/admin/users/${at(person)}/edit`,
      `/admin/users/${at(person)}/delete`,
      `/admin/users/${at(person)}/reset`,
      `/admin/users/${at(leaving)}`,
      `/admin/users/${at(leaving)}/restore`,
      "/admin/aliases",
      "/admin/aliases/new",
      `/admin/aliases/${at(adminAlias)}/edit`,
      `/admin/aliases/${at(adminAlias)}/delete`,
      "/admin/domains",
      `/admin/domains/${addressDomain}`,
      `/admin/domains/${addressDomain}/delete`,
      `/admin/domains/${longDomain}`,
      `/admin/domains/${longDomain}/delete`,
      "/admin/invite-codes",
      "/admin/reserved-names",
      "/admin/openpgp-keys",
      "/admin/settings",
      "/admin/api-tokens",
      `/admin/api-tokens/${token?.id}/delete`,
      "/admin/webhooks",
      "/admin/webhooks/new",
      `/admin/webhooks/${endpointId}/edit`,
      `/admin/webhooks/${endpointId}/delete`,
      `/admin/webhooks/${endpointId}/deliveries`,
      `/admin/webhook-deliveries/${delivery?.id}`,
      "/admin/maintenance",
      "/admin/audit-log",
      "/admin/security-events",
    ];
    for (const path of paths) await visit(page, path);

    // What an admin sees once: a new user's recovery token, a new API token, a webhook's secret.
    await page.goto(`${service.url}/admin/users/new`);
    await fillByLabel(page, "E-mail address", `${localOf("anothernewpersonwithalongname")}@${addressDomain}`);
    await fillByLabel(page, "Password", password);
    await fillByLabel(page, "Repeat the password", password);
    await page.getByRole("button", { name: "Create user" }).click();
    await page.locator("#recovery-token").waitFor();
    await fits(page, "/admin/users/new (the recovery token)");
    await page.goto(`${service.url}/admin/api-tokens`);
    await fillByLabel(page, "Name", tokenName);
    await page.getByLabel(/^mailbox-server/).check();
    await page.getByRole("button", { name: /Create/ }).click();
    await page.waitForLoadState();
    await fits(page, "/admin/api-tokens (the new token)");
    await page.goto(`${service.url}/admin/maintenance`);
    await page
      .getByRole("button", { name: /Show who would go/ })
      .first()
      .click();
    await page.waitForLoadState();
    await fits(page, "/admin/maintenance (a dry run)");
    await context.close();

    // A domain admin's view of the same: its own domain's pages, its navigation.
    const scoped = await newContextPage(browser, { width });
    await signInOnPage(scoped.page, service.url, domainAdmin, password);
    for (const path of [
      "/admin",
      "/admin/users",
      "/admin/aliases",
      "/admin/invite-codes",
      "/admin/openpgp-keys",
      "/admin/security-events",
    ])
      await visit(scoped.page, path);
    await visit(scoped.page, "/admin/domain");
    assert.equal(decodeURIComponent(new URL(scoped.page.url()).pathname), `/admin/domains/${addressDomain}`);
    await scoped.context.close();
    noneOverflowed();
  });

  test("the first start: domain, administrator and settings with the longest address", async () => {
    const fresh = await startService({ web: true });
    try {
      const { context, page } = await newContextPage(browser, { width });
      await page.goto(`${fresh.url}/`);
      await page.waitForURL(`${fresh.url}/init`);
      await fits(page);
      // postmaster@ makes 254 characters.
      const domain = domainOf("thefirstdomainofthisservice", 254 - "postmaster@".length);
      await fillByLabel(page, "Set-up code", (await fresh.services.setup.openSetupCode()) ?? "");
      await fillByLabel(page, "Domain name", domain);
      await page.getByRole("button", { name: "Continue" }).click();
      await page.getByRole("heading", { name: "Step 2 of 3: the administrator" }).waitFor();
      await fits(page);
      await fillByLabel(page, "Password", password);
      await fillByLabel(page, "Repeat password", password);
      await page.getByRole("button", { name: "Continue" }).click();
      await page.waitForURL(`${fresh.url}/init/settings`);
      await fits(page);
      // The console's path: the domain made there, the administrator's step asks for the code.
      const consolePath = await startService({ web: true });
      try {
        await consolePath.services.domains.create(domain);
        await page.goto(`${consolePath.url}/init/user`);
        await page.getByLabel("Set-up code").waitFor();
        await fits(page);
      } finally {
        await consolePath.close();
      }
      await context.close();
      noneOverflowed();
    } finally {
      await fresh.close();
    }
  });

  test("no page of the web interface was left out", () => {
    // Not pages: the style sheet and scripts, a file download, and redirects to a page checked above.
    const notPages = new Set(["/static/*", "/admin/reserved-names/export", "/admin/"]);
    const pattern = (route: string) =>
      new RegExp(`^${route.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:\w+/g, "[^/]+")}$`);
    const missing = [...getPages]
      .filter((route) => !notPages.has(route))
      .filter((route) => ![...checked].some((path) => pattern(route).test(decodeURIComponent(path))));
    assert.deepEqual(missing, [], "pages not checked at 375 px");
  });
});
