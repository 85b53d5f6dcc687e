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
  signInOnPage,
} from "../helpers/browser.ts";
import { password } from "../helpers/fixtures.ts";
import { startService, type TestService } from "../helpers/service.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

describe("web: the user's aliases (real Chromium)", { skip: skip ?? false }, () => {
  let service: TestService;
  let browser: Browser;
  let mta: string;

  before(async () => {
    service = await startService({ web: true });
    browser = await launchBrowser();
    mta = await service.token("mta");
    const { domains, users, aliases } = service.services;
    await domains.create("example.org");
    await domains.create("example.com");
    await users.create({ email: "bob@example.org", password, mailCrypt: false });
    await users.create({ email: "alice@example.org", password, mailCrypt: false });
    await users.create({
      email: "admin@example.org",
      password,
      mailCrypt: false,
      roles: ["ROLE_DOMAIN_ADMIN"],
    });
    await users.create({ email: "spam@example.org", password, mailCrypt: false, roles: ["ROLE_SPAM"] });
    // A cross-domain alias an administrator gave bob: it is listed with his own.
    await aliases.create({ source: "bob@example.com", owner: "bob@example.org" });
  });
  after(async () => {
    await browser?.close();
    await service?.close();
  });

  const lookup = async (kind: "alias" | "senders", address: string) => {
    const answer = await service.request("GET", `/api/mta/${kind}/${address}`, { token: mta });
    assert.equal(answer.status, 200);
    return answer.body as string[];
  };

  const fieldError = (page: Page, label: string) =>
    page.locator(".field.has-error", { has: page.getByLabel(label, { exact: true }) }).locator(".error");

  test("a random alias created on the page resolves at once at /api/mta/alias and /api/mta/senders; deleting it stops that", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "bob@example.org", password);
    await page.getByRole("link", { name: "Aliases" }).click();
    await page.waitForURL(`${service.url}/account/alias`);
    assert.match(await page.locator("#custom-aliases").innerText(), /bob@example\.com/);
    assert.deepEqual(await seriousViolations(page), []);

    // Two forms have a field labelled "Note (optional)": each is taken by its id.
    await page.locator("#field-randomNote").fill("x".repeat(41));
    await page.getByRole("button", { name: "Create a random alias" }).click();
    assert.match(await page.locator("#field-randomNote-error").innerText(), /at most 40 characters/);
    assert.equal(await page.locator("#field-randomNote").inputValue(), "x".repeat(41));
    assert.deepEqual(await seriousViolations(page), []);

    await page.locator("#field-randomNote").fill("  my shop  ");
    await page.getByRole("button", { name: "Create a random alias" }).click();
    await page.waitForURL(`${service.url}/account/alias`);
    const flash = await page.locator(".flash-success").innerText();
    const source = /([0-9a-z]{24}@example\.org)/.exec(flash)?.[1];
    assert.ok(source, `the new address is named: ${flash}`);
    const row = page.locator("#random-aliases tr", { hasText: source });
    assert.match(await row.innerText(), /my shop/);
    assert.deepEqual(await lookup("alias", source), ["bob@example.org"]);
    assert.deepEqual(await lookup("senders", source), ["bob@example.org"]);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "aliases");

    await row.getByRole("button", { name: `Delete ${source}` }).click();
    await page.waitForURL(`${service.url}/account/alias`);
    assert.match(await page.locator(".flash-success").innerText(), /has been deleted/);
    assert.equal(await page.locator("#random-aliases tr", { hasText: source }).count(), 0);
    assert.deepEqual(await lookup("alias", source), []);
    assert.deepEqual(await lookup("senders", source), []);
    await context.close();
  });

  test("custom aliases: the reason of each refusal next to the field, then three at most; only admins may delete one", async () => {
    const { context, page } = await newContextPage(browser);
    await signInOnPage(page, service.url, "alice@example.org", password);
    await page.goto(`${service.url}/account/alias`);
    const create = async (localPart: string, note = "") => {
      await fillByLabel(page, "Alias name", localPart);
      await page.locator("#field-customNote").fill(note);
      await page.getByRole("button", { name: "Create custom alias" }).click();
    };
    const refusals: [string, RegExp][] = [
      ["Bad Name!", /unexpected characters/],
      ["a..b", /not a valid address/],
      [".alice", /not a valid address/],
      ["postmaster", /already taken/],
      ["bob", /already taken/],
    ];
    for (const [localPart, reason] of refusals) {
      await create(localPart);
      assert.match(await fieldError(page, "Alias name").innerText(), reason, localPart);
      assert.equal(await page.getByLabel("Alias name").inputValue(), localPart);
    }
    assert.deepEqual(await seriousViolations(page), []);
    await create("team.alice", "y".repeat(41));
    assert.match(await page.locator("#field-customNote-error").innerText(), /at most 40 characters/);

    for (const [index, localPart] of ["Team.Alice", "alice-2", "alice_3"].entries()) {
      await create(localPart, `note ${index}`);
      await page.waitForURL(`${service.url}/account/alias`);
      const address = `${localPart.toLowerCase()}@example.org`;
      assert.match(await page.locator(".flash-success").innerText(), new RegExp(address.replace(".", "\\.")));
      assert.deepEqual(await lookup("alias", address), ["alice@example.org"]);
    }
    // At the limit the form gives way to the reason.
    assert.equal(await page.getByLabel("Alias name").count(), 0);
    assert.match(await page.locator("#custom-limit").innerText(), /limit of 3 custom aliases/);
    const custom = page.locator("#custom-aliases");
    assert.equal(await custom.getByRole("button").count(), 0, "a user cannot delete a custom alias");
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "aliases-custom-limit");

    // The same POST the page would make, with the form's CSRF token: refused, nothing deleted.
    const id = await service.services.database.db
      .selectFrom("aliases")
      .select("id")
      .where("source", "=", "alice-2@example.org")
      .executeTakeFirstOrThrow();
    const token = await page.locator('input[name="_csrf"]').first().inputValue();
    const answer = await page.request.post(`${service.url}/account/alias/delete/${id.id}`, {
      form: { _csrf: token },
    });
    assert.equal(answer.status(), 403);
    assert.match(await answer.text(), /only be deleted by the administrators/);
    assert.deepEqual(await lookup("alias", "alice-2@example.org"), ["alice@example.org"]);
    await context.close();
  });

  test("a domain admin deletes a custom alias; the address stays taken; German; 375 px; spam users are refused", async () => {
    const { context, page } = await newContextPage(browser, { width: 375 });
    await signInOnPage(page, service.url, "admin@example.org", password);
    await page.goto(`${service.url}/account/alias`);
    await fillByLabel(page, "Alias name", "helpdesk");
    await page.getByRole("button", { name: "Create custom alias" }).click();
    await page.waitForURL(`${service.url}/account/alias`);
    assert.deepEqual(await seriousViolations(page), []);
    await screenshot(page, "aliases-375");
    await page
      .locator("#custom-aliases tr", { hasText: "helpdesk@example.org" })
      .getByRole("button", { name: "Delete helpdesk@example.org" })
      .click();
    await page.waitForURL(`${service.url}/account/alias`);
    assert.deepEqual(await lookup("alias", "helpdesk@example.org"), []);
    await fillByLabel(page, "Alias name", "helpdesk");
    await page.getByRole("button", { name: "Create custom alias" }).click();
    assert.match(await fieldError(page, "Alias name").innerText(), /already taken/);

    await page.goto(`${service.url}/account/alias?lang=de`);
    assert.equal(await page.locator("h1").innerText(), "Aliasse");
    await fillByLabel(page, "Alias-Name", "a b");
    await page.getByRole("button", { name: "Eigenen Alias erstellen" }).click();
    assert.match(await page.locator(".field.has-error .error").innerText(), /unerwartete Zeichen/);
    assert.deepEqual(await seriousViolations(page), []);
    await page.goto(`${service.url}/account/alias?lang=en`);
    await context.close();

    const spam = await newContextPage(browser);
    await signInOnPage(spam.page, service.url, "spam@example.org", password);
    const refused = await spam.page.goto(`${service.url}/account/alias`);
    assert.equal(refused?.status(), 403);
    await spam.context.close();
  });
});
