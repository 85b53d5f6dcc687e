/**
 * The leased-outbox worker (src/outbox/leased-worker.ts) that sends e-mail and webhooks, on a real
 * database (SQLite, or the server TEST_DATABASE_URL names), for both of its tables: two workers
 * (each with its own connections, like two instances) never deliver one row twice; a lease that
 * ran out is retaken and the late worker's record is ignored; the retry schedule; pruning; stop
 * waits for the attempts under way. The delivery callback is the test's own: what e-mail and
 * webhooks send is tested in mail.test.ts and webhooks.test.ts.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import type { Kysely } from "kysely";
import { type DatabaseHandle, openDatabase } from "../src/db/database.ts";
import { insertReturningId } from "../src/db/insert.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import type { Database, LeasedOutboxColumns } from "../src/db/schema.ts";
import { createLogger } from "../src/logger.ts";
import {
  type AttemptResult,
  type LeasedOutbox,
  type LeasedOutboxTable,
  LeasedOutboxWorker,
} from "../src/outbox/leased-worker.ts";
import { scratchDatabase } from "./helpers/databases.ts";

type Outboxes = Kysely<Record<LeasedOutboxTable, LeasedOutboxColumns>>;
const view = (db: Kysely<Database>) => db as unknown as Outboxes;

let scratch: Awaited<ReturnType<typeof scratchDatabase>>;
/** Two handles on one database: two instances of the service. */
let first: DatabaseHandle;
let second: DatabaseHandle;
let endpointId: number;

before(async () => {
  scratch = await scratchDatabase("mas-leased-outbox-");
  first = await openDatabase(scratch.url, { poolSize: 4 });
  await migrateToLatest(first);
  second = await openDatabase(scratch.url, { poolSize: 4 });
  const now = Math.floor(Date.now() / 1000);
  endpointId = await insertReturningId(first.db, "webhook_endpoints", {
    url: "http://127.0.0.1:1/unused",
    secret: "s",
    events: JSON.stringify(["user.created"]),
    enabled: 1,
    created_at: now,
    updated_at: now,
  });
});
after(async () => {
  await second?.close();
  await first?.close();
  await scratch?.remove();
});

/** Adds a row due since a minute ago (or one with the given columns) to the table. */
async function add(table: LeasedOutboxTable, id: string, columns: Partial<LeasedOutboxColumns> = {}) {
  const now = Math.floor(Date.now() / 1000);
  const common = {
    id,
    status: "pending" as const,
    attempts: 0,
    next_attempt_at: now - 60,
    claimed_until: null,
    claim_token: null,
    error: null,
    created_at: now,
    ...columns,
  };
  if (table === "mail_outbox")
    await first.db
      .insertInto("mail_outbox")
      .values({ ...common, recipient: `${id}@example.net`, subject: "s", body: "b", sent_at: null })
      .execute();
  else
    await first.db
      .insertInto("webhook_deliveries")
      .values({
        ...common,
        endpoint_id: endpointId,
        type: "user.created",
        body: "{}",
        signature: "x",
        response_code: null,
        response_body: null,
        delivered_at: null,
      })
      .execute();
}

const rows = (table: LeasedOutboxTable) =>
  view(first.db).selectFrom(table).selectAll().orderBy("id").execute();

for (const table of ["mail_outbox", "webhook_deliveries"] as const) {
  describe(`the leased-outbox worker on ${table}`, () => {
    // A clock that stands still unless a test moves it: the lease and delay boundaries are exact.
    let base = Date.now();
    let skipped = 0;
    const clock = () => base + skipped;
    const seconds = () => Math.floor(clock() / 1000);

    beforeEach(async () => {
      base = Date.now();
      skipped = 0;
      await first.db.deleteFrom(table).execute();
    });

    type Row = { id: string; attempts: number };
    const worker = (
      handle: DatabaseHandle,
      deliver: (row: Row, attempt: number) => Promise<AttemptResult>,
      more: Partial<LeasedOutbox<LeasedOutboxTable, Row, undefined, AttemptResult>> = {},
    ) =>
      new LeasedOutboxWorker(handle.db, createLogger("silent"), {
        table: table as LeasedOutboxTable,
        name: "test",
        retryDelays: [10, 60],
        leaseSeconds: 60,
        pollIntervalMs: 10,
        concurrency: 4,
        clock,
        load: (id) =>
          view(handle.db)
            .selectFrom(table)
            .select(["id", "attempts"])
            .where("id", "=", id)
            .executeTakeFirst(),
        deliver,
        record: () => ({}),
        report: () => {},
        ...more,
      });
    const succeed = async () => ({ success: true, error: null });

    test("two workers with their own connections never deliver one row twice", {
      timeout: 30000,
    }, async () => {
      const ids = Array.from({ length: 24 }, (_, i) => `row-${String(i).padStart(2, "0")}`);
      for (const id of ids) await add(table, id);
      const delivered: string[] = [];
      const deliver = async (row: Row) => {
        delivered.push(row.id);
        // An attempt takes a while, so the two workers' polls and claims overlap.
        await new Promise((resolve) => setTimeout(resolve, 5));
        return { success: true, error: null };
      };
      const a = worker(first, deliver);
      const b = worker(second, deliver);
      const counts = await Promise.all([a.runOnce(), b.runOnce(), a.runOnce(), b.runOnce()]);
      assert.equal(
        counts.reduce((sum, n) => sum + n, 0),
        24,
      );
      assert.deepEqual([...delivered].sort(), ids);
      const after = await rows(table);
      assert.ok(
        after.every((row) => row.status === "success" && row.attempts === 1 && row.claim_token === null),
      );
    });

    test("a live lease is respected; one that ran out is retaken, and the late worker's record is ignored", async () => {
      await add(table, "leased");
      let release: (result: AttemptResult) => void = () => {};
      let entered: () => void = () => {};
      const inAttempt = new Promise<void>((resolve) => (entered = resolve));
      const stuck = worker(first, () => {
        entered();
        return new Promise<AttemptResult>((resolve) => (release = resolve));
      });
      const stuckPass = stuck.runOnce();
      await inAttempt;
      const [claimed] = await rows(table);
      assert.equal(claimed?.claimed_until, seconds() + 60);
      assert.ok(claimed?.claim_token);

      const deliveredByOther: string[] = [];
      const other = worker(second, async (row) => {
        deliveredByOther.push(row.id);
        return { success: true, error: null };
      });
      assert.equal(await other.runOnce(), 0, "not taken while the lease lives");
      skipped = 59_000;
      assert.equal(await other.runOnce(), 0, "nor in its last second");
      skipped = 61_000;
      assert.equal(await other.runOnce(), 1, "taken once the lease has run out");
      assert.deepEqual(deliveredByOther, ["leased"]);

      release({ success: false, error: "too late" });
      assert.equal(await stuckPass, 1);
      const [row] = await rows(table);
      assert.deepEqual(
        [row?.status, row?.attempts, row?.error, row?.claimed_until, row?.claim_token],
        ["success", 1, null, null, null],
      );
    });

    test("a failure waits the schedule's next delay; the last one, or a permanent one, fails the row", async () => {
      await add(table, "down");
      await add(table, "flaky");
      await add(table, "refused");
      const finals: [string, number, boolean][] = [];
      const attempts: string[] = [];
      const w = worker(
        first,
        async (row, attempt) => {
          attempts.push(`${row.id}#${attempt}`);
          if (row.id === "flaky" && attempt === 2) return { success: true, error: null };
          return { success: false, permanent: row.id === "refused", error: `no (${attempt})` };
        },
        { report: ({ id, attempt, final }) => finals.push([id, attempt, final]) },
      );
      const state = async () =>
        (await rows(table)).map((r) => [r.id, r.status, r.attempts, r.next_attempt_at, r.error]);

      assert.equal(await w.runOnce(), 3);
      const t1 = seconds();
      assert.deepEqual(await state(), [
        ["down", "pending", 1, t1 + 10, "no (1)"],
        ["flaky", "pending", 1, t1 + 10, "no (1)"],
        ["refused", "failed", 1, null, "no (1)"],
      ]);
      skipped = 9_000;
      assert.equal(await w.runOnce(), 0, "not due before 10 s");
      skipped = 10_000;
      assert.equal(await w.runOnce(), 2);
      const t2 = seconds();
      assert.deepEqual(await state(), [
        ["down", "pending", 2, t2 + 60, "no (2)"],
        ["flaky", "success", 2, null, null],
        ["refused", "failed", 1, null, "no (1)"],
      ]);
      skipped = 69_000;
      assert.equal(await w.runOnce(), 0, "not due before 60 s more");
      skipped = 70_000;
      assert.equal(await w.runOnce(), 1);
      assert.deepEqual((await state())[0], ["down", "failed", 3, null, "no (3)"]);
      skipped = 1_000_000;
      assert.equal(await w.runOnce(), 0, "no attempt after the schedule is exhausted");
      assert.deepEqual(attempts.sort(), ["down#1", "down#2", "down#3", "flaky#1", "flaky#2", "refused#1"]);
      assert.deepEqual(finals.sort(), [
        ["down", 1, false],
        ["down", 2, false],
        ["down", 3, true],
        ["flaky", 1, false],
        ["flaky", 2, true],
        ["refused", 1, true],
      ]);
    });

    test("stop waits for the attempt under way and then polls no more", async () => {
      await add(table, "first");
      let release: () => void = () => {};
      let entered: () => void = () => {};
      const inAttempt = new Promise<void>((resolve) => (entered = resolve));
      const delivered: string[] = [];
      const w = worker(first, (row) => {
        delivered.push(row.id);
        entered();
        return new Promise<AttemptResult>(
          (resolve) => (release = () => resolve({ success: true, error: null })),
        );
      });
      w.start();
      await inAttempt;
      let stopped = false;
      const stopping = w.stop().then(() => (stopped = true));
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(stopped, false, "stop waits for the attempt");
      release();
      await stopping;
      assert.equal((await rows(table))[0]?.status, "success", "the attempt is recorded before stop returns");
      await add(table, "second");
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.deepEqual(delivered, ["first"]);
      // Left for the next worker.
      assert.equal(await worker(first, succeed).runOnce(), 1);
    });
  });
}

describe("the leased-outbox worker's pruning", () => {
  test("deletes what its rules name, at most once per period", async () => {
    let skipped = 0;
    const clock = () => Date.now() + skipped;
    const daysAgo = (days: number) => Math.floor(Date.now() / 1000) - days * 86400;
    await first.db.deleteFrom("mail_outbox").execute();
    const never = daysAgo(-365);
    await add("mail_outbox", "sent-old", { status: "success", next_attempt_at: null });
    await add("mail_outbox", "sent-recent", { status: "success", next_attempt_at: null });
    await add("mail_outbox", "failed-old", {
      status: "failed",
      next_attempt_at: null,
      created_at: daysAgo(31),
    });
    await add("mail_outbox", "failed-recent", {
      status: "failed",
      next_attempt_at: null,
      created_at: daysAgo(29),
    });
    await add("mail_outbox", "pending-old", { next_attempt_at: never, created_at: daysAgo(100) });
    const sentAt = (id: string, days: number) =>
      first.db
        .updateTable("mail_outbox")
        .set({ sent_at: daysAgo(days) })
        .where("id", "=", id)
        .execute();
    await sentAt("sent-old", 15);
    await sentAt("sent-recent", 13);

    const w = new LeasedOutboxWorker(first.db, createLogger("silent"), {
      table: "mail_outbox",
      name: "test",
      retryDelays: [],
      leaseSeconds: 60,
      pollIntervalMs: 10,
      concurrency: 4,
      clock,
      load: async () => undefined as { attempts: number } | undefined,
      deliver: async () => ({ success: true, error: null }),
      record: () => ({}),
      report: () => {},
      prune: {
        everySeconds: 3600,
        rules: [
          { status: "success", column: "sent_at", keepSeconds: 14 * 86400 },
          { status: "failed", column: "created_at", keepSeconds: 30 * 86400 },
        ],
      },
    });
    const left = async () => (await rows("mail_outbox")).map((row) => row.id);
    assert.equal(await w.runOnce(), 0);
    assert.deepEqual(await left(), ["failed-recent", "pending-old", "sent-recent"]);

    await add("mail_outbox", "sent-old-2", { status: "success", next_attempt_at: null });
    await sentAt("sent-old-2", 15);
    skipped = 3599_000;
    await w.runOnce();
    assert.ok((await left()).includes("sent-old-2"), "not pruned again within the hour");
    skipped = 3600_000;
    await w.runOnce();
    assert.ok(!(await left()).includes("sent-old-2"), "pruned once the hour is over");
    assert.equal(await w.prune(), 0, "prune on demand: nothing left to delete");
  });
});
