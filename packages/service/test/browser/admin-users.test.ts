import assert from "node:assert/strict";
import { createPrivateKey, createPublicKey } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Browser, Page } from "playwright-core";
import {
  browserUnavailable,
  fillByLabel,
  launchBrowser,
  newContextPage,
  screenshot,
  seriousViolations,
  signInOnPage,
} from "../helpers/browser.ts";
import { password } from "../helpers/fixtures.ts";
import { startService, type TestService } from "../helpers/service.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

/**
 * The admin area in Chromium: an admin creates a domain, a user and an alias on the pages and the
 * integration API answers for them; a reset shows a new recovery token whose keys passdb opens
 * with the new password; a domain admin sees its own domain only; the audit log shows each
 * action; every page is axe-core clean.
 */
describe("web: the admin area, users and domains (real Chromium)", { skip: skip ?? false }, () => {
  let service: TestService;
  let browser: Browser;
  let tokens: { mailbox: string; mta: string; admin: string };
  const newPassword = "a fresh password for dora";

  before(async () => {
    service = await startService({ web: true });
    browser = await launchBrowser();
    tokens = {
      mailbox: await service.token("mailbox-server"),
      mta: await service.token("mta"),
      admin: await service.token("admin"),
    };
    const { domains, users } = service.services;
    await domains.create("example.org");
    await users.create({ email: "admin@example.org", password, roles: ["ROLE_ADMIN"] });
    for (let i = 0; i < 24; i++) await users.create({ email: `member${i}@example.org`, password });
  });
  after(async () => {
    await browser?.close();
    await service?.close();
  });

  const clean = async (page: Page, where: string) =>
    assert.deepEqual(await seriousViolations(page), [], `axe-core on ${where}`);

  test("an admin creates a domain, a user and an alias; the integration API and the admin API answer for them", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "admin@example.org", password);
    await page.getByRole("link", { name: "Administration" }).click();
    await page.waitForURL(`${service.url}/admin`);
    await clean(page, "the dashboard");

    await page
      .getByRole("navigation", { name: "Administration" })
      .getByRole("link", { name: "Domains" })
      .click();
    await clean(page, "the domain list");
    await fillByLabel(page, "Domain name", "example.net");
    await page.getByRole("button", { name: "Add domain" }).click();
    await page.waitForURL(`${service.url}/admin/domains/example.net`);
    assert.match(await page.locator(".flash").innerText(), /example\.net has been added/);
    await clean(page, "the domain page");

    await page.goto(`${service.url}/admin/users/new`);
    await clean(page, "the new-user form");
    await fillByLabel(page, "E-mail address", "dora@example.net");
    await fillByLabel(page, "Password", password);
    await fillByLabel(page, "Repeat the password", password);
    await page.getByLabel(/^ROLE_PERMANENT/).check();
    await fillByLabel(page, "Mailbox quota (MiB)", "1024");
    await page.getByRole("button", { name: "Create user" }).click();
    await page.locator("#recovery-token").waitFor();
    const firstToken = await page.locator("#recovery-token").innerText();
    assert.match(firstToken, /^[0-9a-f-]{36}$/);
    assert.ok(!page.url().includes(firstToken), "the token is never in a URL");
    await clean(page, "the recovery token page");

    await page.goto(`${service.url}/admin/aliases/new`);
    await clean(page, "the new-alias form");
    await fillByLabel(page, "Alias address", "sales@example.net");
    await fillByLabel(page, "Owner", "dora@example.net");
    await page.getByRole("button", { name: "Create alias" }).click();
    await page.waitForURL(`${service.url}/admin/aliases`);
    assert.match(await page.locator("main").innerText(), /sales@example\.net\s+dora@example\.net/);
    await clean(page, "the alias list");

    const userdb = await service.request("GET", "/api/mailbox-server/dora@example.net", {
      token: tokens.mailbox,
    });
    assert.equal(userdb.status, 200);
    const alias = await service.request("GET", "/api/mta/alias/sales@example.net", { token: tokens.mta });
    assert.equal(alias.status, 200);
    assert.match(alias.text, /dora@example\.net/);
    const viaApi = await service.request("GET", "/api/admin/users/dora@example.net", { token: tokens.admin });
    assert.deepEqual(
      { roles: viaApi.body.roles, quota: viaApi.body.quota, recovery: viaApi.body.hasRecoveryToken },
      { roles: ["ROLE_USER", "ROLE_PERMANENT"], quota: 1024, recovery: true },
    );

    // The users list and the user page, for the README.
    await page.goto(`${service.url}/admin/users`);
    await clean(page, "the users list");
    await screenshot(page, "admin-users");
    await page.getByRole("link", { name: "dora@example.net" }).click();
    await page.waitForURL(`${service.url}/admin/users/dora%40example.net`);
    assert.match(await page.locator("main").innerText(), /sales@example\.net/);
    await clean(page, "the user page");
    await screenshot(page, "admin-user");
    await page.goto(`${service.url}/admin`);
    await screenshot(page, "admin-dashboard");
    await context.close();
  });

  test("a reset shows a new recovery token once; passdb with the new password opens a key that matches userdb", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "admin@example.org", password);
    await page.goto(`${service.url}/admin/users/dora%40example.net`);
    await page.getByRole("link", { name: "Reset" }).click();
    await page.waitForURL(`${service.url}/admin/users/dora%40example.net/reset`);
    await clean(page, "the reset page");
    await fillByLabel(page, "New password", newPassword);
    await fillByLabel(page, "Repeat the password", "not the same password");
    await page.getByRole("button", { name: "Reset" }).click();
    assert.match(await page.locator("#field-passwordRepeat-error").innerText(), /do not match/);
    await fillByLabel(page, "New password", newPassword);
    await fillByLabel(page, "Repeat the password", newPassword);
    await page.getByRole("button", { name: "Reset" }).click();
    await page.locator("#recovery-token").waitFor();
    const token = await page.locator("#recovery-token").innerText();
    assert.match(token, /^[0-9a-f-]{36}$/);
    await clean(page, "the reset result");

    const passdb = await service.request("POST", "/api/mailbox-server/dora@example.net", {
      token: tokens.mailbox,
      json: { password: newPassword },
    });
    assert.equal(passdb.status, 200, passdb.text);
    const userdb = await service.request("GET", "/api/mailbox-server/dora@example.net", {
      token: tokens.mailbox,
    });
    const privatePem = Buffer.from(passdb.body.body.mailCryptPrivateKey, "base64").toString();
    const derived = createPublicKey(createPrivateKey(privatePem)).export({ type: "spki", format: "pem" });
    assert.equal(derived, Buffer.from(userdb.body.body.mailCryptPublicKey, "base64").toString());
    // The token shown opens the recovery box of the new key.
    const { openSecretBox } = await import("../../src/credentials/mailcrypt.ts");
    const user = await service.services.users.get("dora@example.net");
    assert.equal(
      await openSecretBox(user.recoverySecretBox!, token, service.services.pool),
      passdb.body.body.mailCryptPrivateKey,
    );
    const old = await service.request("POST", "/api/mailbox-server/dora@example.net", {
      token: tokens.mailbox,
      json: { password },
    });
    assert.equal(old.status, 401, "the old password no longer works");
    await context.close();
  });

  test("a domain admin sees its own domain only, gets 403 on another domain's user by URL and cannot give ROLE_ADMIN", async () => {
    const { users } = service.services;
    await users.create({ email: "dina@example.net", password, roles: ["ROLE_DOMAIN_ADMIN"] });
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "dina@example.net", password);
    await page.goto(`${service.url}/admin`);
    assert.match(await page.locator("main").innerText(), /Figures of the domain example\.net/);
    const nav = await page.getByRole("navigation", { name: "Administration" }).innerText();
    for (const hidden of ["Settings", "API tokens", "Webhooks", "Maintenance", "Reserved names"])
      assert.ok(!nav.includes(hidden), hidden);
    await clean(page, "a domain admin's dashboard");
    await page.goto(`${service.url}/admin/users`);
    const list = await page.locator("table").innerText();
    assert.match(list, /dora@example\.net/);
    assert.doesNotMatch(list, /example\.org/);
    await clean(page, "a domain admin's user list");

    const forbidden = await page.goto(`${service.url}/admin/users/member1%40example.org`);
    assert.equal(forbidden?.status(), 403);
    assert.match(await page.locator("main").innerText(), /not allowed/);
    await clean(page, "the 403 page");
    assert.equal((await page.goto(`${service.url}/admin/settings`))?.status(), 403);

    await page.goto(`${service.url}/admin/users/dora%40example.net/edit`);
    await clean(page, "a domain admin's edit form");
    assert.equal(await page.getByLabel(/^ROLE_ADMIN/).count(), 0, "ROLE_ADMIN is not offered");
    assert.equal(await page.getByLabel(/^ROLE_DOMAIN_ADMIN/).count(), 1);
    // A crafted form (the checkbox added by hand) is refused by the service.
    await page.evaluate(`(() => {
      const box = document.createElement("input");
      box.type = "checkbox";
      box.name = "roles";
      box.value = "ROLE_ADMIN";
      box.checked = true;
      document.querySelector("form.card").append(box);
    })()`);
    await page.getByRole("button", { name: "Save" }).click();
    assert.match(await page.locator("#field-roles-error").innerText(), /not allowed to assign/);
    assert.deepEqual((await users.get("dora@example.net")).roles, ["ROLE_USER", "ROLE_PERMANENT"]);
    await page.getByLabel(/^ROLE_DOMAIN_ADMIN/).check();
    await page.getByRole("button", { name: "Save" }).click();
    await page.waitForURL(`${service.url}/admin/users/dora%40example.net`);
    assert.deepEqual((await users.get("dora@example.net")).roles, [
      "ROLE_USER",
      "ROLE_PERMANENT",
      "ROLE_DOMAIN_ADMIN",
    ]);
    await context.close();
  });

  test("the audit log shows each action with who, what, when and from where, and filters", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "admin@example.org", password);
    await page.goto(`${service.url}/admin/audit-log`);
    await clean(page, "the audit log");
    const rows = await page.locator("table.audit tbody tr").allInnerTexts();
    const has = (pattern: RegExp) => rows.some((row) => pattern.test(row));
    assert.ok(has(/admin@example\.org\s+domain\.create\s+example\.net/), "domain created");
    assert.ok(has(/admin@example\.org\s+user\.create\s+dora@example\.net/), "user created");
    assert.ok(has(/admin@example\.org\s+alias\.create\s+sales@example\.net/), "alias created");
    assert.ok(has(/admin@example\.org\s+user\.reset\s+dora@example\.net/), "user reset");
    assert.ok(
      has(/dina@example\.net\s+user\.update\s+dora@example\.net.*ROLE_DOMAIN_ADMIN.*127\.0\.0\.1/s),
      "role change",
    );
    assert.ok(!rows.join("\n").includes(newPassword), "no password in the log");
    await page.getByLabel("Action").selectOption("user.reset");
    await Promise.all([
      page.waitForURL(/[?&]action=user\.reset/),
      page.getByRole("button", { name: "Apply filters" }).click(),
    ]);
    const filtered = await page.locator("table.audit tbody tr").allInnerTexts();
    assert.equal(filtered.length, 1);
    assert.match(filtered[0] ?? "", /user\.reset/);
    await context.close();
  });

  test("every admin page is axe-core clean, also in German and at 375 px", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "admin@example.org", password);
    await page.goto(`${service.url}/admin?lang=de`);
    assert.equal(await page.locator("h1").innerText(), "Übersicht");
    const paths = [
      "/admin",
      "/admin/users",
      "/admin/users?search=member&status=all&mailCrypt=enabled",
      "/admin/users/new",
      "/admin/users/dora%40example.net",
      "/admin/users/dora%40example.net/edit",
      "/admin/users/dora%40example.net/delete",
      "/admin/users/dora%40example.net/reset",
      "/admin/aliases",
      "/admin/aliases/new",
      "/admin/aliases/sales%40example.net/edit",
      "/admin/aliases/sales%40example.net/delete",
      "/admin/domains",
      "/admin/domains/example.net",
      "/admin/domains/example.net/delete",
      "/admin/invite-codes",
      "/admin/reserved-names",
      "/admin/openpgp-keys",
      "/admin/settings",
      "/admin/api-tokens",
      "/admin/webhooks",
      "/admin/webhooks/new",
      "/admin/maintenance",
      "/admin/audit-log",
      "/admin/security-events",
    ];
    for (const path of paths) {
      const response = await page.goto(`${service.url}${path}`);
      assert.equal(response?.status(), 200, path);
      assert.equal(await page.locator("html").getAttribute("lang"), "de");
      await clean(page, path);
    }
    await page.setViewportSize({ width: 375, height: 800 });
    for (const path of ["/admin", "/admin/users", "/admin/users/dora%40example.net", "/admin/settings"]) {
      await page.goto(`${service.url}${path}`);
      await clean(page, `${path} at 375 px`);
      const overflow = await page.evaluate<number>(
        "document.documentElement.scrollWidth - window.innerWidth",
      );
      assert.ok(overflow <= 1, `${path} scrolls sideways by ${overflow}px at 375 px`);
    }
    await context.close();
  });
});
