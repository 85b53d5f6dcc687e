import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { chmod } from "node:fs/promises";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import {
  entriesOf,
  formatTimestamp,
  malformedOf,
  PendingStore,
  parsePendingFile,
  parseTimestamp,
  serializePendingFile,
} from "../src/pending.ts";
import { eventTime, staleness } from "../src/server.ts";
import { cleanup, tempDir } from "./helpers.ts";

const dirs: string[] = [];
after(() => cleanup(...dirs));

async function store(content?: string): Promise<PendingStore> {
  const dir = await tempDir();
  dirs.push(dir);
  const path = join(dir, "mailboxes.csv");
  if (content !== undefined) writeFileSync(path, content);
  const result = new PendingStore(path);
  await result.init();
  return result;
}

describe("timestamps", () => {
  test("RFC 3339 with offsets, fractions and Z", () => {
    assert.equal(parseTimestamp("2025-09-10T11:36:14+00:00")?.toISOString(), "2025-09-10T11:36:14.000Z");
    assert.equal(parseTimestamp("2025-09-10T13:36:14+02:00")?.toISOString(), "2025-09-10T11:36:14.000Z");
    assert.equal(parseTimestamp("2025-09-10T11:36:14.250Z")?.toISOString(), "2025-09-10T11:36:14.250Z");
    assert.equal(parseTimestamp("2025-09-10 11:36:14Z")?.toISOString(), "2025-09-10T11:36:14.000Z");
    for (const bad of [
      "",
      "2025-09-10",
      "2025-09-10T11:36:14",
      "yesterday",
      "2025-13-10T11:36:14Z",
      "1757504174",
    ]) {
      assert.equal(parseTimestamp(bad), null, bad);
    }
    assert.equal(formatTimestamp(new Date("2025-09-10T11:36:14.999Z")), "2025-09-10T11:36:14Z");
  });

  test("freshness: within 5 minutes of the receipt, either way; the event time never ahead of it", () => {
    const received = new Date("2026-01-01T12:00:00Z");
    for (const fresh of ["2026-01-01T12:00:00+00:00", "2026-01-01T11:55:00Z", "2026-01-01T13:05:00+01:00"])
      assert.equal(staleness(fresh, received), null, fresh);
    for (const [refused, why] of [
      ["2026-01-01T11:54:59Z", /301 s old/],
      ["2026-01-01T12:05:01Z", /301 s in the future/],
      ["2025-09-10T11:36:14+00:00", /old/],
      [undefined, /missing/],
      ["not a date", /RFC 3339/],
      [1767268800, /missing/],
      ["2026-01-01T12:00:00", /RFC 3339/],
    ] as const) {
      assert.match(staleness(refused, received) ?? "fresh", why, String(refused));
    }
    assert.equal(
      eventTime(new Date("2026-01-01T11:58:00Z"), received).toISOString(),
      "2026-01-01T11:58:00.000Z",
    );
    assert.equal(eventTime(new Date("2026-01-01T12:01:00Z"), received), received);
  });
});

describe("file format", () => {
  test("parses entries, keeps malformed lines and comments verbatim", () => {
    const text = [
      "email,timestamp",
      "alice@example.org,2025-09-10T11:36:14Z",
      "garbage without comma",
      "# an operator's note",
      "",
      '"bob@example.org","2025-09-11T00:00:00+02:00"',
      "x$(id)@example.org,2025-09-10T11:36:14Z",
      "carol@example.org,not-a-time",
      "dave@example.org,2025-09-10T11:36:14Z,extra",
    ].join("\r\n");
    const file = parsePendingFile(text);
    assert.equal(file.hasHeader, true);
    assert.deepEqual(
      entriesOf(file).map((e) => [e.email, e.timestamp.toISOString()]),
      [
        ["alice@example.org", "2025-09-10T11:36:14.000Z"],
        ["bob@example.org", "2025-09-10T22:00:00.000Z"],
      ],
    );
    assert.deepEqual(
      malformedOf(file).map((m) => m.line),
      [3, 7, 8, 9],
    );
    assert.equal(
      serializePendingFile(file.lines),
      [
        "email,timestamp",
        "alice@example.org,2025-09-10T11:36:14Z",
        "garbage without comma",
        "# an operator's note",
        '"bob@example.org","2025-09-11T00:00:00+02:00"',
        "x$(id)@example.org,2025-09-10T11:36:14Z",
        "carol@example.org,not-a-time",
        "dave@example.org,2025-09-10T11:36:14Z,extra",
        "",
      ].join("\n"),
    );
  });

  test("a file without header gets one on the next write", async () => {
    const pending = await store("alice@example.org,2025-09-10T11:36:14Z\n");
    await pending.add("bob@example.org", new Date("2025-09-10T12:00:00Z"));
    assert.equal(
      readFileSync(pending.path, "utf8"),
      "email,timestamp\nalice@example.org,2025-09-10T11:36:14Z\nbob@example.org,2025-09-10T12:00:00Z\n",
    );
  });
});

describe("PendingStore", () => {
  test("init creates the file with a header and removes stale temporary files", async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const path = join(dir, "mailboxes.csv");
    writeFileSync(join(dir, ".mailboxes.csv.123.abcdef.tmp"), "email,timestamp\nhalf");
    writeFileSync(join(dir, "unrelated.tmp"), "keep me");
    await new PendingStore(path).init();
    assert.equal(readFileSync(path, "utf8"), "email,timestamp\n");
    assert.deepEqual(readdirSync(dir).sort(), ["mailboxes.csv", "unrelated.tmp"]);
  });

  test("init fails when the directory does not exist", async () => {
    await assert.rejects(new PendingStore("/nonexistent-dir-for-janitor-test/x.csv").init());
  });

  test("add, duplicate, advance, remove", async () => {
    const pending = await store();
    const t1 = new Date("2025-09-10T11:36:14Z");
    assert.equal(await pending.add("alice@example.org", t1), "added");
    assert.equal(await pending.add("ALICE@example.org", new Date()), "exists");
    assert.equal(
      await pending.add("alice@example.org", new Date("2026-01-01T00:00:00Z"), { advance: true }),
      "exists",
    );
    assert.equal(
      await pending.add("alice@example.org", new Date("2020-01-01T00:00:00Z"), { advance: true }),
      "advanced",
    );
    assert.equal(await pending.add("bob@example.org", t1), "added");
    assert.equal(
      readFileSync(pending.path, "utf8"),
      "email,timestamp\nalice@example.org,2020-01-01T00:00:00Z\nbob@example.org,2025-09-10T11:36:14Z\n",
    );
    assert.equal(await pending.remove("Alice@Example.org"), 1);
    assert.equal(await pending.remove("nobody@example.org"), 0);
    assert.equal(
      readFileSync(pending.path, "utf8"),
      "email,timestamp\nbob@example.org,2025-09-10T11:36:14Z\n",
    );
    await assert.rejects(pending.add("a$(x)@b", t1), /refusing to store/);
  });

  test("writes keep malformed lines and re-read operator edits", async () => {
    const pending = await store("email,timestamp\nnot a line\nalice@example.org,2025-09-10T11:36:14Z\n");
    await pending.add("bob@example.org", new Date("2025-09-10T12:00:00Z"));
    // an operator deletes alice and adds a comment
    writeFileSync(
      pending.path,
      "email,timestamp\nnot a line\n# restored alice\nbob@example.org,2025-09-10T12:00:00Z\n",
    );
    await pending.add("carol@example.org", new Date("2025-09-10T13:00:00Z"));
    assert.equal(
      readFileSync(pending.path, "utf8"),
      "email,timestamp\nnot a line\n# restored alice\nbob@example.org,2025-09-10T12:00:00Z\ncarol@example.org,2025-09-10T13:00:00Z\n",
    );
  });

  test("1000 concurrent adds and removes lose nothing and leave no temporary files", async () => {
    const pending = await store();
    const emails = Array.from({ length: 1000 }, (_, i) => `user${i}@example.org`);
    const results = await Promise.all(
      emails.map((email) => pending.add(email, new Date("2025-01-01T00:00:00Z"))),
    );
    assert.ok(results.every((r) => r === "added"));
    await Promise.all(emails.filter((_, i) => i % 2 === 0).map((email) => pending.remove(email)));
    const entries = entriesOf(await pending.read()).map((e) => e.email);
    assert.deepEqual(
      entries,
      emails.filter((_, i) => i % 2 === 1),
    );
    await pending.idle();
    assert.deepEqual(readdirSync(join(pending.path, "..")), ["mailboxes.csv"]);
  });

  test("a new file is private; an existing file keeps its mode", async () => {
    const pending = await store();
    assert.equal(statSync(pending.path).mode & 0o777, 0o600);
    await chmod(pending.path, 0o640);
    await pending.add("alice@example.org", new Date());
    assert.equal(statSync(pending.path).mode & 0o777, 0o640);
  });

  test("after close, writes are refused", async () => {
    const pending = await store();
    const write = pending.add("alice@example.org", new Date());
    await pending.close();
    assert.equal(await write, "added");
    await assert.rejects(pending.add("bob@example.org", new Date()), /closed/);
  });
});
