import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Browser, Page } from "playwright-core";
import { createLogger } from "../../src/logger.ts";
import { DeliveryWorker } from "../../src/webhooks/worker.ts";
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
import { type Receiver, startReceiver } from "../helpers/receiver.ts";
import { startService, type TestService } from "../helpers/service.ts";

const skip = browserUnavailable();
if (skip) console.log(`# browser tests skipped: ${skip}`);

/**
 * Webhooks, API tokens and maintenance in the admin area, in Chromium: an endpoint created on the
 * page receives a signed `user.deleted` after a deletion on the page, the delivery is in its log;
 * a delivery the receiver refused (500) is retried by hand and then succeeds. A token created on
 * the page works once shown and stops when deleted; the inactive-user removal runs dry first.
 */
describe("web: the admin area, webhooks, tokens and maintenance (real Chromium)", {
  skip: skip ?? false,
}, () => {
  let service: TestService;
  let browser: Browser;
  let receiver: Receiver;
  let worker: DeliveryWorker;
  let page: Page;
  const secret = "a-shared-secret-for-the-receiver";

  before(async () => {
    service = await startService({ web: true });
    browser = await launchBrowser();
    receiver = await startReceiver();
    const { domains, users } = service.services;
    await domains.create("example.org");
    await users.create({ email: "admin@example.org", password, roles: ["ROLE_ADMIN"] });
    for (const email of ["gone@example.org", "refused@example.org", "sleepy@example.org"])
      await users.create({ email, password });
    // No retries: a refused attempt fails at once, so the manual retry is what sends it again.
    worker = new DeliveryWorker(service.services.database.db, createLogger("silent"), {
      retryDelays: [],
      timeoutMs: 2000,
      pollIntervalMs: 50,
    });
    worker.start();
    ({ page } = await newContextPage(browser));
    await signInOnPage(page, service.url, "admin@example.org", password);
  });
  after(async () => {
    await worker?.stop();
    await receiver?.close();
    await browser?.close();
    await service?.close();
  });

  const clean = async (where: string) =>
    assert.deepEqual(await seriousViolations(page), [], `axe-core on ${where}`);

  const deleteOnPage = async (email: string) => {
    await page.goto(`${service.url}/admin/users/${encodeURIComponent(email)}`);
    await page.getByRole("link", { name: "Delete user" }).click();
    await page.waitForURL(/\/delete$/);
    await clean("the delete confirmation");
    await page.getByRole("button", { name: "Delete user" }).click();
    await page.waitForURL(`${service.url}/admin/users`);
  };

  const waitForStatus = async (deliveryId: string, status: string) => {
    const deadline = Date.now() + 15000;
    for (;;) {
      const row = await service.services.database.db
        .selectFrom("webhook_deliveries")
        .select("status")
        .where("id", "=", deliveryId)
        .executeTakeFirstOrThrow();
      if (row.status === status) return;
      if (Date.now() > deadline) throw new Error(`delivery ${deliveryId} stayed ${row.status}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  test("an endpoint created on the page receives a signed user.deleted after a deletion on the page; the log shows it", async () => {
    await page.goto(`${service.url}/admin/webhooks`);
    await clean("the webhook list");
    await page.getByRole("link", { name: "New endpoint" }).click();
    await clean("the endpoint form");
    await fillByLabel(page, "URL", receiver.url);
    await page.getByLabel("user.created").uncheck();
    await page.getByLabel("user.reset").uncheck();
    await fillByLabel(page, "Secret", secret);
    await page.getByRole("button", { name: "Create endpoint" }).click();
    assert.equal(await page.locator("#webhook-secret").innerText(), secret);
    await clean("the created endpoint");

    await deleteOnPage("gone@example.org");
    const [delivery] = await receiver.waitFor(1);
    assert.ok(delivery);
    const body = delivery.body.toString();
    assert.equal(
      delivery.headers["x-webhook-signature"],
      createHmac("sha256", secret).update(delivery.body).digest("hex"),
      "signed over the bytes sent",
    );
    assert.deepEqual(
      { ...JSON.parse(body), timestamp: "" },
      {
        type: "user.deleted",
        timestamp: "",
        data: { email: "gone@example.org" },
      },
    );
    const id = String(delivery.headers["x-webhook-id"]);
    await waitForStatus(id, "success");

    await page.goto(`${service.url}/admin/webhooks`);
    await page.getByRole("link", { name: `Delivery log ${receiver.url}` }).click();
    const log = await page.locator("table").innerText();
    assert.match(log, /user\.deleted\s+Delivered\s+1\s+200/);
    await clean("the delivery log");
    await screenshot(page, "admin-webhook-deliveries");
    await page.getByRole("link", { name: id }).click();
    assert.equal(await page.locator("#request-body").innerText(), body);
    assert.match(
      await page.locator("main").innerText(),
      new RegExp(`x-webhook-signature: ${delivery.headers["x-webhook-signature"]}`),
    );
    await clean("the delivery detail");
  });

  test("a delivery the receiver refused (500) fails, is retried by hand on its page and then succeeds", async () => {
    receiver.respond = () => 500;
    const before = receiver.received.length;
    await deleteOnPage("refused@example.org");
    await receiver.waitFor(before + 1);
    const id = String(receiver.received[before]?.headers["x-webhook-id"]);
    await waitForStatus(id, "failed");

    const endpoint = (await service.services.webhooks.list())[0];
    await page.goto(`${service.url}/admin/webhooks/${endpoint?.id}/deliveries`);
    await page.getByLabel("Status").selectOption("failed");
    // The filtered page, not the one it replaces: the rows are read once the new address is loaded.
    await Promise.all([
      page.waitForURL(/[?&]status=failed/),
      page.getByRole("button", { name: "Apply filters" }).click(),
    ]);
    const failed = await page.locator("table tbody tr").allInnerTexts();
    assert.equal(failed.length, 1);
    assert.match(failed[0] ?? "", /user\.deleted\s+Failed\s+1\s+500/);
    await clean("the filtered delivery log");
    await page.getByRole("link", { name: id }).click();
    assert.match(await page.locator("main").innerText(), /Answer\s+500/);

    receiver.respond = () => 204;
    await page.getByRole("button", { name: "Retry" }).click();
    assert.match(await page.locator(".flash").innerText(), /queued again/);
    await receiver.waitFor(before + 2);
    const retried = receiver.received[before + 1];
    assert.equal(retried?.headers["x-webhook-id"], id, "the same delivery");
    assert.equal(retried?.headers["x-webhook-attempt"], "2");
    assert.equal(retried?.body.toString(), receiver.received[before]?.body.toString(), "the same bytes");
    await waitForStatus(id, "success");
    await page.reload();
    assert.match(await page.locator("main").innerText(), /Delivered/);
    assert.equal(await page.getByRole("button", { name: "Retry" }).count(), 0);
    await clean("the retried delivery");
  });

  test("an API token created on the page is shown once and works; deleted after confirming, it stops", async () => {
    await page.goto(`${service.url}/admin/api-tokens`);
    await clean("the token list");
    await fillByLabel(page, "Name", "postfix");
    await page.getByLabel(/^mta/).check();
    await page.getByRole("button", { name: "Create token" }).click();
    const token = await page.locator("#api-token").innerText();
    assert.match(token, /^[0-9a-f]{64}$/);
    await clean("the created token");
    const lookup = () => service.request("GET", "/api/mta/domain/example.org", { token });
    assert.equal((await lookup()).status, 200);
    await page.goto(`${service.url}/admin/api-tokens`);
    assert.ok(!(await page.locator("main").innerText()).includes(token), "never shown again");
    await page.getByRole("link", { name: "Delete the API token postfix?" }).click();
    await clean("the token delete confirmation");
    await page.getByRole("button", { name: "Delete token" }).click();
    await page.waitForURL(`${service.url}/admin/api-tokens`);
    assert.equal((await lookup()).status, 401);
  });

  test("maintenance: the inactive-user removal runs dry first, listing who would go; then for real", async () => {
    const { database, users } = service.services;
    const old = Math.floor(Date.now() / 1000) - 3 * 365 * 86400;
    await database.db
      .updateTable("users")
      .set({ last_login_time: old, created_at: old })
      .where("email", "=", "sleepy@example.org")
      .execute();
    await database.db
      .updateTable("users")
      .set({ last_login_time: old, created_at: old })
      .where("email", "=", "admin@example.org")
      .execute();
    await page.goto(`${service.url}/admin/maintenance`);
    await clean("the maintenance page");
    await page.getByRole("button", { name: "Show who would go remove-inactive-users" }).click();
    assert.match(await page.locator("#would-remove").innerText(), /sleepy@example\.org/);
    assert.doesNotMatch(await page.locator("#would-remove").innerText(), /admin@example\.org/);
    assert.match(await page.locator("#job-result").innerText(), /would delete 1, keep 1 exempt/);
    assert.equal((await users.get("sleepy@example.org")).deleted, false, "the dry run wrote nothing");
    await clean("the dry run");
    await page.getByRole("button", { name: "Remove this 1 user now" }).click();
    assert.match(await page.locator("#job-result").innerText(), /deleted 1/);
    assert.equal((await users.get("sleepy@example.org")).deleted, true);
    await page.getByRole("button", { name: "Run now prune-webhook-deliveries" }).click();
    assert.match(await page.locator("#job-result").innerText(), /pruned/);
    await page.goto(`${service.url}/admin/audit-log?action=job.run`);
    assert.equal(await page.locator("table.audit tbody tr").count(), 3);
  });
});
