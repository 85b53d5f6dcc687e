import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import { createLogger } from "../src/logger.ts";
import { aliasCreatedMessage } from "../src/mail/messages.ts";
import { MailOutbox, mailSettings } from "../src/mail/outbox.ts";
import { MailWorker } from "../src/mail/sender.ts";
import { scratchDatabase } from "./helpers/databases.ts";
import { runConsole } from "./helpers/process.ts";
import { startService, type TestService } from "./helpers/service.ts";
import { type SmtpReceiver, startSmtpReceiver } from "./helpers/smtp-receiver.ts";

/** The e-mail outbox and its worker against a real local SMTP server, on the test database. */
describe("e-mail", () => {
  let service: TestService;
  let relay: SmtpReceiver;
  // A fast clock: real time plus whatever the test has skipped ahead.
  let skipped = 0;
  const now = () => Date.now() + skipped;

  before(async () => {
    relay = await startSmtpReceiver();
    service = await startService({ serviceOptions: { smtpUrl: relay.url, clock: now } });
    await service.services.settings.update({
      app_name: "Example Mail",
      app_url: "https://users.example.net/",
      project_name: "example.net",
      email_sender_address: "noreply@example.net",
    });
  });
  after(async () => {
    await relay.close();
    await service.close();
  });
  beforeEach(async () => {
    skipped = 0;
    relay.received.length = 0;
    relay.refuse.clear();
    await service.services.database.db.deleteFrom("mail_outbox").execute();
  });

  const worker = (retryDelays = [10, 60]) =>
    new MailWorker(service.services.database.db, createLogger("silent"), relay.url, {
      clock: now,
      retryDelays,
      timeoutMs: 2000,
    });
  const outbox = () =>
    service.services.database.db.selectFrom("mail_outbox").selectAll().orderBy("id").execute();

  test("a message written in a transaction that rolls back is never sent", async () => {
    const { db } = service.services.database;
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        await service.services.mail.welcome(trx, { email: "gone@example.net", locale: "en" });
        throw new Error("the change failed");
      }),
      /the change failed/,
    );
    await db
      .transaction()
      .execute((trx) => service.services.mail.welcome(trx, { email: "kept@example.net", locale: "en" }));
    assert.equal(await worker().runOnce(), 1);
    assert.equal(await worker().runOnce(), 0);
    const [message] = await relay.waitFor(1);
    assert.deepEqual(message?.envelopeTo, ["kept@example.net"]);
    assert.equal(relay.received.length, 1);
    const rows = await outbox();
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.status, "success");
    assert.equal(rows[0]?.attempts, 1);
    assert.equal(typeof rows[0]?.sent_at, "number");
  });

  test("welcome: recipient, From with the app name, subject, links from app_url", async () => {
    await service.services.database.db
      .transaction()
      .execute((trx) => service.services.mail.welcome(trx, { email: "new@example.net", locale: "en" }));
    await worker().runOnce();
    const [message] = await relay.waitFor(1);
    assert.ok(message);
    assert.equal(message.envelopeFrom, "noreply@example.net");
    assert.deepEqual(message.envelopeTo, ["new@example.net"]);
    assert.equal(message.from, "Example Mail <noreply@example.net>");
    assert.equal(message.to, "new@example.net");
    assert.equal(message.subject, "Welcome to example.net");
    assert.match(message.headers.get("content-type") ?? "", /^text\/plain; charset=utf-8/);
    assert.equal(message.headers.get("auto-submitted"), "auto-generated");
    assert.match(message.headers.get("message-id") ?? "", /^<[0-9A-Z]{26}@example\.net>$/);
    assert.match(message.text, /new@example\.net is ready/);
    // app_url's trailing slash is not doubled.
    assert.match(message.text, /^https:\/\/users\.example\.net\/account$/m);
    assert.match(message.text, /^https:\/\/users\.example\.net\/account\/voucher$/m);
    // The reference's hard-coded promises are not made.
    assert.doesNotMatch(message.text, /1 GB|three invite codes/i);
  });

  test("alias created and recovery started, in German", async () => {
    const activeFrom = Date.UTC(2031, 2, 4, 17, 5) / 1000;
    await service.services.database.db.transaction().execute(async (trx) => {
      await service.services.mail.aliasCreated(trx, {
        email: "owner@example.net",
        alias: "x7k2q@example.net",
        locale: "de",
      });
      await service.services.mail.recoveryStarted(trx, {
        email: "owner@example.net",
        activeFrom,
        locale: "de",
      });
    });
    await worker().runOnce();
    const messages = await relay.waitFor(2);
    const alias = messages.find((m) => m.subject === "Neue Alias-Adresse angelegt");
    const recovery = messages.find((m) => m.subject.startsWith("Das Passwort"));
    assert.ok(alias && recovery, messages.map((m) => m.subject).join(" | "));
    assert.deepEqual(alias.envelopeTo, ["owner@example.net"]);
    assert.match(alias.text, /^x7k2q@example\.net$/m);
    assert.match(alias.text, /^https:\/\/users\.example\.net\/account\/alias$/m);
    assert.match(alias.text, /^Hallo,$/m);
    assert.equal(recovery.subject, "Das Passwort deines E-Mail-Kontos owner@example.net wird zurückgesetzt");
    assert.deepEqual(recovery.envelopeTo, ["owner@example.net"]);
    assert.match(recovery.text, /Ab 04\.03\.2031, 17:05 UTC kann/);
    assert.match(recovery.text, /^https:\/\/users\.example\.net\/recovery$/m);
    assert.match(recovery.text, /^https:\/\/users\.example\.net\/account\/recovery-token$/m);
    assert.match(recovery.text, /Wiederherstellungscode/);
  });

  test("alias created in English, built without the database", () => {
    const message = aliasCreatedMessage({
      email: "o@example.net",
      alias: "a@example.net",
      locale: "en",
      settings: { appName: "X", appUrl: "https://u.example.net", projectName: "p" },
    });
    assert.equal(message.subject, "New alias address created");
    assert.match(message.body, /^https:\/\/u\.example\.net\/account\/alias$/m);
  });

  test("relay down: retried after the delay and delivered once it is back, none lost", async () => {
    await relay.stop();
    try {
      await service.services.database.db.transaction().execute(async (trx) => {
        for (const email of ["a@example.net", "b@example.net"]) {
          await service.services.mail.welcome(trx, { email, locale: "en" });
        }
      });
      assert.equal(await worker().runOnce(), 2);
      let rows = await outbox();
      assert.deepEqual(
        rows.map((r) => [r.status, r.attempts]),
        [
          ["pending", 1],
          ["pending", 1],
        ],
      );
      assert.match(rows[0]?.error ?? "", /ECONNREFUSED|connect/i);
      // Not due before the first delay has passed.
      skipped = 5000;
      assert.equal(await worker().runOnce(), 0);
      skipped = 11000;
      assert.equal(await worker().runOnce(), 2);
      rows = await outbox();
      assert.deepEqual(
        rows.map((r) => r.attempts),
        [2, 2],
      );
    } finally {
      await relay.start();
    }
    skipped = 11000 + 61000;
    assert.equal(await worker().runOnce(), 2);
    const received = await relay.waitFor(2);
    assert.deepEqual(received.map((m) => m.envelopeTo[0]).sort(), ["a@example.net", "b@example.net"]);
    const rows = await outbox();
    assert.deepEqual(
      rows.map((r) => [r.status, r.attempts, r.error]),
      [
        ["success", 3, null],
        ["success", 3, null],
      ],
    );
    skipped += 3600_000;
    assert.equal(await worker().runOnce(), 0);
    assert.equal(relay.received.length, 2);
  });

  test("after the last delay a message is failed; a refused recipient fails at once", async () => {
    relay.refuse.add("nobody@example.net");
    await relay.stop();
    try {
      await service.services.database.db
        .transaction()
        .execute((trx) => service.services.mail.welcome(trx, { email: "late@example.net", locale: "en" }));
      assert.equal(await worker([10]).runOnce(), 1);
      skipped = 11000;
      assert.equal(await worker([10]).runOnce(), 1);
    } finally {
      await relay.start();
    }
    const [late] = await outbox();
    assert.equal(late?.status, "failed");
    assert.equal(late?.attempts, 2);
    assert.equal(late?.next_attempt_at, null);

    await service.services.database.db
      .transaction()
      .execute((trx) => service.services.mail.welcome(trx, { email: "nobody@example.net", locale: "en" }));
    assert.equal(await worker([10, 60]).runOnce(), 1);
    const refused = (await outbox()).find((r) => r.recipient === "nobody@example.net");
    assert.equal(refused?.status, "failed");
    assert.equal(refused?.attempts, 1);
    assert.match(refused?.error ?? "", /550/);
    assert.equal(relay.received.length, 0);
  });

  test("two workers never send one message twice", async () => {
    await service.services.database.db.transaction().execute(async (trx) => {
      for (let i = 0; i < 6; i++) {
        await service.services.mail.welcome(trx, { email: `many${i}@example.net`, locale: "en" });
      }
    });
    const counts = await Promise.all([worker().runOnce(), worker().runOnce()]);
    assert.equal(counts[0] + counts[1], 6);
    await relay.waitFor(6);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(relay.received.length, 6);
  });

  test("sent messages are forgotten after 14 days, failed ones after 30, pending ones never", async () => {
    const { db } = service.services.database;
    await db.transaction().execute(async (trx) => {
      for (const email of ["sent@example.net", "failed@example.net", "pending@example.net"])
        await service.services.mail.welcome(trx, { email, locale: "en" });
    });
    const at = (days: number) => Math.floor(Date.now() / 1000) - days * 86400;
    await db
      .updateTable("mail_outbox")
      .set({ status: "success", sent_at: at(15) })
      .where("recipient", "=", "sent@example.net")
      .execute();
    await db
      .updateTable("mail_outbox")
      .set({ status: "failed", next_attempt_at: null, created_at: at(20) })
      .where("recipient", "=", "failed@example.net")
      .execute();
    await db
      .updateTable("mail_outbox")
      .set({ created_at: at(100) })
      .where("recipient", "=", "pending@example.net")
      .execute();
    assert.equal(await worker().prune(), 1);
    assert.deepEqual((await outbox()).map((r) => r.recipient).sort(), [
      "failed@example.net",
      "pending@example.net",
    ]);
    await db
      .updateTable("mail_outbox")
      .set({ created_at: at(31) })
      .where("recipient", "=", "failed@example.net")
      .execute();
    assert.equal(await worker().prune(), 1);
    assert.deepEqual(
      (await outbox()).map((r) => r.recipient),
      ["pending@example.net"],
    );
  });

  test("without SMTP_URL nothing is written", async () => {
    const off = new MailOutbox({ enabled: false });
    const id = await service.services.database.db
      .transaction()
      .execute((trx) => off.welcome(trx, { email: "x@example.net", locale: "en" }));
    assert.equal(id, null);
    assert.equal((await outbox()).length, 0);
    assert.equal(service.services.mail.enabled, true);
  });
});

describe("console: app:mail:list and app:mail:retry", () => {
  test("lists without the text, and sends failed messages again", async () => {
    const scratch = await scratchDatabase("mas-mail-console-");
    const database = await openDatabase(scratch.url, { poolSize: 2 });
    try {
      await migrateToLatest(database);
      const outbox = new MailOutbox({ enabled: true });
      const ids = await database.db.transaction().execute(async (trx) => {
        const settings = await mailSettings(trx);
        const first = await outbox.welcome(trx, { email: "one@example.net", locale: "en" });
        const second = await outbox.enqueue(trx, {
          recipient: "two@example.net",
          subject: "Second",
          body: `a body that is never printed ${settings.appName}`,
        });
        return [first ?? "", second ?? ""];
      });
      await database.db
        .updateTable("mail_outbox")
        .set({ status: "failed", attempts: 8, next_attempt_at: null, error: "connect ECONNREFUSED" })
        .execute();
      const list = runConsole(scratch.url, ["app:mail:list", "--status", "failed"]);
      assert.equal(list.status, 0, list.stderr);
      assert.match(list.stdout, /one@example\.net/);
      assert.match(list.stdout, /ECONNREFUSED/);
      assert.doesNotMatch(list.stdout, /never printed/);
      const json = JSON.parse(runConsole(scratch.url, ["app:mail:list", "--json"]).stdout);
      assert.equal(json.length, 2);
      assert.ok(!("body" in json[0]));

      const one = runConsole(scratch.url, ["app:mail:retry", "--id", ids[0] ?? ""]);
      assert.equal(one.status, 0, one.stderr);
      assert.match(one.stdout, /^1 e-mail/);
      // Two ids made in one millisecond need not sort in the order they were made: order by recipient.
      const rows = await database.db.selectFrom("mail_outbox").selectAll().orderBy("recipient").execute();
      assert.deepEqual(
        rows.map((r) => [r.recipient, r.status, r.attempts]),
        [
          ["one@example.net", "pending", 0],
          ["two@example.net", "failed", 8],
        ],
      );
      assert.match(runConsole(scratch.url, ["app:mail:retry", "--all-failed"]).stdout, /^1 e-mail/);
      const bad = runConsole(scratch.url, ["app:mail:retry"]);
      assert.equal(bad.status, 1);
      assert.match(bad.stderr, /--id <id> or --all-failed/);
      assert.equal(runConsole(scratch.url, ["app:mail:list", "--status", "sent"]).status, 1);
    } finally {
      await database.close();
      await scratch.remove();
    }
  });
});
