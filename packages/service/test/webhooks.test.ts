import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";
import { createBackground } from "../src/background.ts";
import { createLogger } from "../src/logger.ts";
import { DeliveryWorker } from "../src/webhooks/worker.ts";
import { scratchDatabase } from "./helpers/databases.ts";
import { byTest, password } from "./helpers/fixtures.ts";
import { runConsole, startServiceProcess } from "./helpers/process.ts";
import { type Receiver, startReceiver } from "./helpers/receiver.ts";
import { startService, type TestService } from "./helpers/service.ts";

const secret = "a-shared-secret-of-some-length";

describe("webhooks", () => {
  let service: TestService;
  let receiver: Receiver;
  // A fast clock: real time plus whatever the test has skipped ahead.
  let skipped = 0;
  const now = () => Date.now() + skipped;

  before(async () => {
    service = await startService();
    receiver = await startReceiver();
    await service.services.domains.create("example.org");
    await service.services.domains.create("example.com");
  });
  after(async () => {
    await receiver.close();
    await service.close();
  });
  beforeEach(async () => {
    skipped = 0;
    receiver.received.length = 0;
    receiver.respond = () => 200;
    await service.services.database.db.deleteFrom("webhook_endpoints").execute();
  });

  const worker = (retryDelays = [10, 60, 360]) =>
    new DeliveryWorker(service.services.database.db, createLogger("silent"), {
      clock: now,
      retryDelays,
      timeoutMs: 2000,
    });

  test("a deletion delivers a signed user.deleted with the exact bytes signed", async () => {
    await service.services.webhooks.create({ url: receiver.url, events: ["user.deleted"], secret });
    await service.services.users.create({ email: "del@example.org", password, mailCrypt: false });
    await service.services.lifecycle.delete("del@example.org", byTest);
    assert.equal(await worker().runOnce(), 1);
    const [delivery] = await receiver.waitFor(1);
    assert.ok(delivery);
    const expected = createHmac("sha256", secret).update(delivery.body).digest("hex");
    assert.equal(delivery.headers["x-webhook-signature"], expected);
    assert.equal(delivery.headers["content-type"], "application/json");
    assert.equal(delivery.headers["x-webhook-attempt"], "1");
    assert.match(String(delivery.headers["x-webhook-id"]), /^[0-9A-HJKMNP-TV-Z]{26}$/);
    const payload = JSON.parse(delivery.body.toString());
    assert.deepEqual(Object.keys(payload), ["type", "timestamp", "data"]);
    assert.equal(payload.type, "user.deleted");
    assert.deepEqual(payload.data, { email: "del@example.org" });
    assert.match(payload.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/);
  });

  test("event and domain filters; disabled endpoints get nothing", async () => {
    await service.services.webhooks.create({
      url: `${receiver.url}?all`,
      events: ["user.created", "user.deleted", "user.reset"],
      secret,
    });
    await service.services.webhooks.create({
      url: `${receiver.url}?com`,
      events: ["user.deleted"],
      domains: ["example.com"],
      secret,
    });
    await service.services.webhooks.create({
      url: `${receiver.url}?off`,
      events: ["user.deleted"],
      enabled: false,
      secret,
    });
    await service.services.users.create({ email: "f1@example.org", password, mailCrypt: false });
    await service.services.users.create({ email: "f2@example.com", password, mailCrypt: false });
    await service.services.lifecycle.delete("f1@example.org", byTest);
    await service.services.lifecycle.delete("f2@example.com", byTest);
    await worker().runOnce();
    const seen = receiver.received
      .map((r) => `${JSON.parse(r.body.toString()).type} ${JSON.parse(r.body.toString()).data.email}`)
      .sort();
    assert.equal(receiver.received.length, 5);
    assert.deepEqual(seen, [
      "user.created f1@example.org",
      "user.created f2@example.com",
      "user.deleted f1@example.org",
      "user.deleted f2@example.com",
      "user.deleted f2@example.com",
    ]);
  });

  test("a disabled endpoint: deliveries are held, not sent, until it is enabled again; no retry", async () => {
    const admin = await service.token("admin");
    const call = (method: string, path: string, json?: unknown) =>
      service.request(method, `/api/admin${path}`, { token: admin, ...(json ? { json } : {}) });
    const created = await call("POST", "/webhooks", { url: receiver.url, events: ["user.deleted"], secret });
    const id = created.body.id as number;
    const pending = async () =>
      (await call("GET", `/webhooks/${id}/deliveries?status=pending`)).body.items as {
        id: string;
        attempts: number;
      }[];
    await service.services.users.create({ email: "held@example.org", password, mailCrypt: false });
    await service.services.lifecycle.delete("held@example.org", byTest);
    assert.equal((await pending()).length, 1, "queued while enabled");

    assert.equal((await call("PATCH", `/webhooks/${id}`, { enabled: false })).status, 200);
    assert.equal(await worker().runOnce(), 0, "nothing is attempted for a disabled endpoint");
    skipped += 3600_000;
    assert.equal(await worker().runOnce(), 0);
    assert.equal(receiver.received.length, 0);
    const [held] = await pending();
    assert.equal(held?.attempts, 0, "held untouched: still pending, no attempt counted");
    await service.services.users.create({ email: "later@example.org", password, mailCrypt: false });
    await service.services.lifecycle.delete("later@example.org", byTest);
    assert.equal((await pending()).length, 1, "no new event is queued while disabled");

    assert.equal((await call("PATCH", `/webhooks/${id}`, { enabled: true })).status, 200);
    assert.equal(await worker().runOnce(), 1, "sent once enabled again");
    const [delivery] = await receiver.waitFor(1);
    assert.equal(JSON.parse(delivery?.body.toString() ?? "{}").data.email, "held@example.org");

    // A failed delivery cannot be retried while its endpoint is disabled.
    receiver.respond = () => 503;
    await service.services.users.create({ email: "fails@example.org", password, mailCrypt: false });
    await service.services.lifecycle.delete("fails@example.org", byTest);
    assert.equal(await worker([]).runOnce(), 1);
    const failed = (await call("GET", `/webhooks/${id}/deliveries?status=failed`)).body.items[0];
    assert.ok(failed, "the delivery failed");
    assert.equal((await call("PATCH", `/webhooks/${id}`, { enabled: false })).status, 200);
    const refused = await call("POST", `/webhook-deliveries/${failed.id}/retry`);
    assert.equal(refused.status, 409);
    assert.deepEqual(refused.body, {
      message: `webhook endpoint ${id} is disabled; enable it before retrying its deliveries`,
    });
    assert.equal((await call("GET", `/webhooks/${id}/deliveries?status=failed`)).body.total, 1);
    assert.equal((await call("PATCH", `/webhooks/${id}`, { enabled: true })).status, 200);
    const retried = await call("POST", `/webhook-deliveries/${failed.id}/retry`);
    assert.equal(retried.status, 200);
    assert.equal(retried.body.status, "pending");
  });

  test("a receiver answering 500 twice then 200: retried after 10 s and 60 s, then success", async () => {
    const { endpoint } = await service.services.webhooks.create({
      url: receiver.url,
      events: ["user.reset"],
      secret,
    });
    receiver.respond = (_d, index) => (index < 2 ? 500 : 200);
    await service.services.users.create({ email: "retry@example.org", password, mailCrypt: false });
    await service.services.lifecycle.reset("retry@example.org", "another password 123", byTest);
    const w = worker();
    assert.equal(await w.runOnce(), 1);
    assert.equal(await w.runOnce(), 0, "not due before 10 s");
    // Due times are stored in whole seconds and real time runs on beside the skipped time, so
    // "not yet due" is checked 2 s early: 1 s would fail when an attempt fell late in its second.
    skipped += 8_000;
    assert.equal(await w.runOnce(), 0);
    skipped += 2_000;
    assert.equal(await w.runOnce(), 1);
    skipped += 58_000;
    assert.equal(await w.runOnce(), 0, "not due before 60 s more");
    skipped += 2_000;
    assert.equal(await w.runOnce(), 1);
    assert.deepEqual(
      receiver.received.map((r) => r.headers["x-webhook-attempt"]),
      ["1", "2", "3"],
    );
    assert.equal(
      new Set(receiver.received.map((r) => r.body.toString())).size,
      1,
      "the same bytes every time",
    );
    const log = await service.services.webhooks.deliveries(endpoint.id, { limit: 10, offset: 0 });
    assert.equal(log.items[0]?.status, "success");
    assert.equal(log.items[0]?.attempts, 3);
  });

  test("after 10 s, 60 s and 360 s the delivery fails; a manual retry sends the same bytes", async () => {
    const { endpoint } = await service.services.webhooks.create({
      url: receiver.url,
      events: ["user.deleted"],
      secret,
    });
    receiver.respond = () => 503;
    await service.services.users.create({ email: "fail@example.org", password, mailCrypt: false });
    await service.services.lifecycle.delete("fail@example.org", byTest);
    const w = worker();
    for (const wait of [0, 10, 60, 360]) {
      skipped += wait * 1000;
      assert.equal(await w.runOnce(), 1);
    }
    skipped += 3600_000;
    assert.equal(await w.runOnce(), 0, "no fifth attempt on its own");
    const failed = await service.services.webhooks.deliveries(endpoint.id, {
      status: "failed",
      limit: 10,
      offset: 0,
    });
    assert.equal(failed.total, 1);
    assert.equal(failed.items[0]?.responseCode, 503);
    receiver.respond = () => 200;
    await service.services.webhooks.retry(failed.items[0]?.id ?? "");
    assert.equal(await w.runOnce(), 1);
    assert.equal(receiver.received.length, 5);
    assert.equal(receiver.received[4]?.body.toString(), receiver.received[0]?.body.toString());
    assert.equal(
      receiver.received[4]?.headers["x-webhook-signature"],
      receiver.received[0]?.headers["x-webhook-signature"],
    );
    assert.equal(receiver.received[4]?.headers["x-webhook-attempt"], "5");
    await assert.rejects(service.services.webhooks.retry(failed.items[0]?.id ?? ""), /only failed/);
  });

  test("a transport error (nothing listening) is retried like a bad answer", async () => {
    const { endpoint } = await service.services.webhooks.create({
      url: "http://127.0.0.1:1/nothing",
      events: ["user.deleted"],
      secret,
    });
    await service.services.users.create({ email: "down@example.org", password, mailCrypt: false });
    await service.services.lifecycle.delete("down@example.org", byTest);
    await worker().runOnce();
    const log = await service.services.webhooks.deliveries(endpoint.id, {
      status: "pending",
      limit: 10,
      offset: 0,
    });
    assert.equal(log.items[0]?.attempts, 1);
    assert.ok(log.items[0]?.error);
    assert.equal(log.items[0]?.responseCode, null);
  });

  test("a receiver answering 400 MiB: the worker reads 4 KiB of it, stops, and records the delivery", async () => {
    // A real receiver streaming its answer as fast as the worker takes it, counting what it wrote.
    const total = 400 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, "x");
    const sent: number[] = [];
    let status = 500;
    const big = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        let written = 0;
        res.writeHead(status, { "content-type": "text/plain", "content-length": String(total) });
        const more = () => {
          while (written < total && !res.destroyed) {
            written += chunk.length;
            if (!res.write(chunk)) return void res.once("drain", more);
          }
          res.end();
        };
        res.on("close", () => sent.push(written));
        more();
      });
    });
    await new Promise<void>((resolve) => big.listen(0, "127.0.0.1", resolve));
    const { port } = big.address() as AddressInfo;
    try {
      const { endpoint } = await service.services.webhooks.create({
        url: `http://127.0.0.1:${port}/hook`,
        events: ["user.deleted"],
        secret,
      });
      const rssBefore = process.memoryUsage().rss;
      for (const [index, answer] of [500, 200].entries()) {
        status = answer;
        await service.services.users.create({ email: `big${index}@example.org`, password, mailCrypt: false });
        await service.services.lifecycle.delete(`big${index}@example.org`, byTest);
        assert.equal(await worker().runOnce(), 1);
        const deadline = Date.now() + 5000;
        while (sent.length <= index && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        // What the receiver wrote before the connection closed: socket buffers, never the body.
        assert.ok((sent[index] ?? total) < 32 * 1024 * 1024, `receiver wrote ${sent[index]} bytes`);
      }
      assert.ok(process.memoryUsage().rss - rssBefore < 100 * 1024 * 1024, "no growth by the body's size");
      const log = await service.services.webhooks.deliveries(endpoint.id, { limit: 10, offset: 0 });
      const [succeeded, failed] = log.items;
      assert.equal(succeeded?.status, "success");
      assert.equal(failed?.responseCode, 500);
      assert.equal(failed?.responseBody, "x".repeat(4096));
    } finally {
      big.closeAllConnections();
      await new Promise((resolve) => big.close(resolve));
    }
  });

  test("two workers on one outbox send each delivery once", async () => {
    await service.services.webhooks.create({ url: receiver.url, events: ["user.created"], secret });
    for (let i = 0; i < 12; i++) {
      await service.services.users.create({ email: `many${i}@example.org`, password, mailCrypt: false });
    }
    await Promise.all([worker().runOnce(), worker().runOnce(), worker().runOnce()]);
    assert.equal(receiver.received.length, 12);
    assert.equal(new Set(receiver.received.map((r) => r.headers["x-webhook-id"])).size, 12);
  });

  test("the background worker delivers without being asked; pruning keeps failed deliveries", async () => {
    const { endpoint } = await service.services.webhooks.create({
      url: receiver.url,
      events: ["user.deleted"],
      secret,
    });
    const background = createBackground(service.services, createLogger("silent"), {
      webhooks: { pollIntervalMs: 50 },
    });
    background.worker.start();
    try {
      await service.services.users.create({ email: "bg@example.org", password, mailCrypt: false });
      await service.services.lifecycle.delete("bg@example.org", byTest);
      await receiver.waitFor(1);
    } finally {
      await background.stop();
    }
    const future = Math.floor(Date.now() / 1000) + 15 * 86400;
    assert.equal(await service.services.webhooks.pruneDelivered(14, future), 1);
    assert.equal(
      (await service.services.webhooks.deliveries(endpoint.id, { limit: 10, offset: 0 })).total,
      0,
    );
  });
});

describe("webhooks across a restart of the service process", () => {
  test("a delivery pending when the service stops is sent after it starts again", async () => {
    const receiver = await startReceiver();
    const { url: databaseUrl, remove } = await scratchDatabase("mas-restart-");
    try {
      receiver.respond = () => 500;
      runConsole(databaseUrl, ["app:domain:create", "example.org"]);
      runConsole(databaseUrl, ["app:user:create", "--email", "r@example.org", "--password", password]);
      assert.equal(
        runConsole(databaseUrl, [
          "app:webhook:create",
          "--url",
          receiver.url,
          "--events",
          "user.deleted",
          "--secret",
          secret,
        ]).status,
        0,
      );
      const first = await startServiceProcess({ DATABASE_URL: databaseUrl, WEBHOOK_RETRY_DELAYS: "2" });
      assert.equal(runConsole(databaseUrl, ["app:users:delete", "-u", "r@example.org"]).status, 0);
      await receiver.waitFor(1);
      assert.equal(await first.stop(), 0);
      receiver.respond = () => 200;
      const second = await startServiceProcess({ DATABASE_URL: databaseUrl, WEBHOOK_RETRY_DELAYS: "2" });
      try {
        const received = await receiver.waitFor(2);
        assert.equal(received[1]?.headers["x-webhook-attempt"], "2");
        assert.equal(received[1]?.body.toString(), received[0]?.body.toString());
      } finally {
        await second.stop();
      }
    } finally {
      await receiver.close();
      await remove();
    }
  });
});
