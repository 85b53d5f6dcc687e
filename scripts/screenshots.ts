/**
 * `node scripts/screenshots.ts`: the screenshots of docs/screenshots/, taken in Debian's Chromium
 * from a service on a scratch SQLite database filled with a few demo accounts. English, at 1280 px
 * and at 375 px (a phone). Run it after changing a page; the README shows the results.
 */
import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { launchBrowser } from "../packages/service/test/helpers/browser.ts";
import { startService } from "../packages/service/test/helpers/service.ts";

const out = fileURLToPath(new URL("../docs/screenshots/", import.meta.url));
const password = "correct horse battery staple";
const widths = [1280, 375];

const service = await startService({ web: true });
const browser = await launchBrowser();
try {
  const { domains, users, aliases, settings, webhooks, database } = service.services;
  await settings.update({ app_name: "Example Mail", webmail_url: "https://webmail.example.org" });
  // A webhook endpoint first, so the accounts below leave deliveries in its log.
  const { endpoint } = await webhooks.create({
    url: "https://hooks.example.org/mail",
    events: ["user.created", "user.deleted"],
  });
  await domains.create("example.org");
  await users.create({ email: "admin@example.org", password, roles: ["ROLE_ADMIN"] });
  await users.create({ email: "alice@example.org", password, mailCrypt: true });
  for (const name of ["bob", "carol", "dave"]) await users.create({ email: `${name}@example.org`, password });
  await aliases.create({
    source: "team@example.org",
    destinations: ["alice@example.org"],
    owner: "alice@example.org",
  });
  // The log as a running worker leaves it: delivered, and one refused by the receiver.
  const sent = Math.floor(Date.now() / 1000);
  await database.db
    .updateTable("webhook_deliveries")
    .set({ status: "success", attempts: 1, response_code: 204, delivered_at: sent, next_attempt_at: null })
    .execute();
  const [refused] = await database.db
    .selectFrom("webhook_deliveries")
    .select("id")
    .orderBy("id")
    .limit(1)
    .execute();
  if (refused)
    await database.db
      .updateTable("webhook_deliveries")
      .set({ status: "failed", attempts: 4, response_code: 500, response_body: "internal error" })
      .where("id", "=", refused.id)
      .execute();
  mkdirSync(out, { recursive: true });

  const shoot = async (page: Page, name: string, path: string) => {
    for (const width of widths) {
      await page.setViewportSize({ width, height: width > 400 ? 900 : 780 });
      const answer = await page.goto(`${service.url}${path}`);
      if (!answer || answer.status() >= 400) {
        console.log(`skipped ${name}: ${path} answered ${answer?.status()}`);
        return;
      }
      await page.screenshot({ path: `${out}${name}-${width}.png`, fullPage: true });
    }
    console.log(`docs/screenshots/${name}-{${widths.join(",")}}.png`);
  };
  const signedIn = async (email: string) => {
    const context = await browser.newContext({ locale: "en-GB" });
    const page = await context.newPage();
    await page.goto(`${service.url}/login`);
    await page.getByLabel("E-mail address", { exact: true }).fill(email);
    await page.getByLabel("Password", { exact: true }).fill(password);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL(/\/account/);
    return { context, page };
  };

  const anonymous = await browser.newContext({ locale: "en-GB" });
  const visitor = await anonymous.newPage();
  await shoot(visitor, "login", "/login");
  await shoot(visitor, "recovery", "/recovery");
  await anonymous.close();

  const user = await signedIn("alice@example.org");
  for (const [name, path] of [
    ["account", "/account"],
    ["password", "/account/password"],
    ["aliases", "/account/alias"],
    ["two-factor", "/account/twofactor"],
    ["openpgp", "/account/openpgp"],
  ] as const)
    await shoot(user.page, name, path);
  // Two app passwords, made on the page as a person makes them, then the list.
  for (const [device, scope] of [
    ["Phone", "Mail: IMAP and SMTP"],
    ["Printer", "Sending only (SMTP), for a printer or a script"],
  ] as const) {
    await user.page.goto(`${service.url}/account/app-passwords`);
    await user.page.getByLabel("Device name", { exact: true }).fill(device);
    await user.page.getByLabel(scope, { exact: true }).check();
    await user.page.getByLabel("Your current password", { exact: true }).fill(password);
    await user.page.getByRole("button", { name: "Create app password" }).click();
    await user.page.locator("#app-password").waitFor();
  }
  await shoot(user.page, "app-passwords", "/account/app-passwords");
  await user.context.close();

  const admin = await signedIn("admin@example.org");
  for (const [name, path] of [
    ["admin-dashboard", "/admin"],
    ["admin-users", "/admin/users"],
    ["admin-user", "/admin/users/alice%40example.org"],
    ["admin-webhooks", "/admin/webhooks"],
    ["admin-webhook-deliveries", `/admin/webhooks/${endpoint.id}/deliveries`],
  ] as const)
    await shoot(admin.page, name, path);
  await admin.context.close();
} finally {
  await browser.close();
  await service.close();
}
