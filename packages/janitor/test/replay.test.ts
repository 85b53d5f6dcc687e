/**
 * Replays and wildcards against the real daemon: a captured delivery played back (same id, new id,
 * after a restart), stale and future timestamps, and addresses a purge tool would read as a mask.
 * The purge command records its arguments, so "never ran" is read from a file.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import {
  atom,
  cleanup,
  csvEntries,
  event,
  type Janitor,
  postWebhook,
  readLines,
  sleep,
  startJanitor,
  tempDir,
  waitFor,
} from "./helpers.ts";

const dirs: string[] = [];
after(() => cleanup(...dirs));

async function janitor(dir: string, env: Record<string, string> = {}): Promise<Janitor> {
  const started = await startJanitor({
    dir,
    env: { PURGER_COMMAND: recordingCommand(dir), PURGER_RETENTION_HOURS: "24", ...env },
  });
  return started;
}

async function directory(): Promise<string> {
  const dir = await tempDir();
  dirs.push(dir);
  return dir;
}

/** A purge command that appends its argv (one line per run) to <dir>/calls. */
function recordingCommand(dir: string): string {
  return `printf '%s|%s|%s\\n' {email} {domain} {local_part} >> '${join(dir, "calls")}'`;
}

const calls = (dir: string): string[] => readLines(join(dir, "calls"));

/** Waits for `ms` more of the daemon's life, so that a purge started by mistake would have run. */
const settle = (ms = 700) => sleep(ms);

describe("replays", () => {
  test("the same delivery again (same id): 200, nothing run again", async () => {
    const dir = await directory();
    const j = await janitor(dir);
    const payload = event("user.reset", "alice@example.org");
    const first = await postWebhook(j.url, payload, { id: "01JREPLAYSAMEID" });
    assert.equal(first.status, 200, first.body);
    await waitFor("the purge", () => calls(dir).length === 1);
    await waitFor("the entry to be removed", () => readLines(j.csv).length === 1);
    for (let i = 0; i < 3; i += 1) {
      const again = await postWebhook(j.url, payload, { id: "01JREPLAYSAMEID" });
      assert.equal(again.status, 200);
      assert.match(again.body, /duplicate delivery/);
    }
    await settle();
    assert.deepEqual(calls(dir), ["alice@example.org|example.org|alice"]);
    assert.deepEqual(readLines(j.csv), ["email,timestamp"]);
    const note = await j.waitForLog("the replay's log line", (line) =>
      line.msg.startsWith("delivery already handled"),
    );
    assert.equal(note["deliveryId"], "01JREPLAYSAMEID");
  });

  test("the same body with a new id: nothing run again, no pending entry added", async () => {
    const dir = await directory();
    const j = await janitor(dir, { PURGER_RETENTION_HOURS: "0", PURGER_TICK_INTERVAL: "1s" });
    const deleted = JSON.stringify(event("user.deleted", "bob@example.org"));
    assert.equal((await postWebhook(j.url, deleted, { id: "01JFIRST" })).status, 200);
    await waitFor("bob to be purged", () => calls(dir).length === 1 && readLines(j.csv).length === 1);
    const reset = JSON.stringify(event("user.reset", "carol@example.org"));
    assert.equal((await postWebhook(j.url, reset, { id: "01JSECOND" })).status, 200);
    await waitFor("carol to be purged", () => calls(dir).length === 2);
    // an attacker who captured both plays them back under fresh ids
    for (let i = 0; i < 5; i += 1) {
      for (const body of [deleted, reset]) {
        const replay = await postWebhook(j.url, body, { id: `01JFORGED${i}` });
        assert.equal(replay.status, 200);
        assert.match(replay.body, /duplicate delivery/);
      }
    }
    const ticks = j.logs.filter((line) => line.msg.startsWith("purge tick")).length;
    await waitFor(
      "two more purge ticks",
      () => j.logs.filter((l) => l.msg.startsWith("purge tick")).length >= ticks + 2,
    );
    assert.deepEqual(calls(dir).sort(), [
      "bob@example.org|example.org|bob",
      "carol@example.org|example.org|carol",
    ]);
    assert.deepEqual(readLines(j.csv), ["email,timestamp"]);
  });

  test("20 concurrent copies of one delivery under different ids run the command once", async () => {
    const dir = await directory();
    const j = await janitor(dir);
    const body = JSON.stringify(event("user.reset", "dave@example.org"));
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => postWebhook(j.url, body, { id: `01JCONCURRENT${i}` })),
    );
    assert.deepEqual(
      answers.map((a) => a.status),
      answers.map(() => 200),
    );
    assert.equal(answers.filter((a) => /purging/.test(a.body)).length, 1);
    await waitFor("the purge", () => calls(dir).length >= 1);
    await settle();
    assert.deepEqual(calls(dir), ["dave@example.org|example.org|dave"]);
  });

  test("after a restart the janitor still knows the delivery (same id and new id)", async () => {
    const dir = await directory();
    const first = await janitor(dir);
    const body = JSON.stringify(event("user.reset", "erin@example.org"));
    assert.equal((await postWebhook(first.url, body, { id: "01JBEFORERESTART" })).status, 200);
    await waitFor("the purge", () => calls(dir).length === 1 && readLines(first.csv).length === 1);
    assert.equal((await first.stop()).code, 0);

    const seen = readLines(join(dir, "mailboxes.csv.seen")).map((line) => JSON.parse(line));
    assert.equal(seen.length, 1);
    assert.equal(seen[0].id, "01JBEFORERESTART");
    assert.equal(seen[0].body, createHash("sha256").update(body).digest("hex"));

    const second = await janitor(dir);
    for (const id of ["01JBEFORERESTART", "01JAFTERRESTART"]) {
      const replay = await postWebhook(second.url, body, { id });
      assert.equal(replay.status, 200);
      assert.match(replay.body, /duplicate delivery/);
    }
    await settle();
    assert.deepEqual(calls(dir), ["erin@example.org|example.org|erin"]);
    assert.deepEqual(readLines(second.csv), ["email,timestamp"]);
  });

  test("the seen file keeps only what is still fresh: older entries are dropped at start", async () => {
    const dir = await directory();
    const line = (id: string, offsetMs: number) =>
      JSON.stringify({ id, body: createHash("sha256").update(id).digest("hex"), timestamp: atom(offsetMs) });
    writeFileSync(
      join(dir, "mailboxes.csv.seen"),
      `${line("01JANHOURAGO", -3_600_000)}\n${line("01JELEVENMIN", -11 * 60_000)}\nnot json\n${line("01JRECENT", -60_000)}\n`,
    );
    const j = await janitor(dir);
    const ids = readLines(join(dir, "mailboxes.csv.seen")).map((l) => JSON.parse(l).id);
    assert.deepEqual(ids, ["01JRECENT"]);
    const dropped = await j.waitForLog("the unreadable line", (l) => l.msg.startsWith("unreadable line"));
    assert.equal(dropped["content"], "not json");
    // a remembered id counts even for a body never seen
    const answer = await postWebhook(j.url, event("user.reset", "frank@example.org"), { id: "01JRECENT" });
    assert.match(answer.body, /duplicate delivery/);
    await settle();
    assert.deepEqual(calls(dir), []);
  });

  test("a delivery whose event could not be stored is not remembered: the service's retry is taken", async () => {
    const dir = await directory();
    const j = await janitor(dir);
    const body = JSON.stringify(event("user.deleted", "grace@example.org"));
    // The file cannot be written: a directory stands where the file was.
    rmSync(j.csv);
    mkdirSync(j.csv);
    const failed = await postWebhook(j.url, body, { id: "01JRETRIED" });
    assert.equal(failed.status, 500);
    rmdirSync(j.csv);
    const retried = await postWebhook(j.url, body, { id: "01JRETRIED" });
    assert.equal(retried.status, 200, retried.body);
    assert.match(retried.body, /recorded/);
    assert.deepEqual(
      csvEntries(j.csv).rows.map((r) => r[0]),
      ["grace@example.org"],
    );
  });
});

describe("stale and future timestamps", () => {
  test("older than 5 minutes, more than 5 minutes ahead, missing or unreadable: 400, logged, nothing done", async () => {
    const dir = await directory();
    const j = await janitor(dir, { PURGER_RETENTION_HOURS: "0", PURGER_TICK_INTERVAL: "1s" });
    const cases: [string | undefined, RegExp][] = [
      [atom(-5 * 60_000 - 10_000), /s old, more than 300 s/],
      [atom(-86_400_000), /s old/],
      ["2025-09-10T11:36:14+00:00", /s old/],
      [atom(5 * 60_000 + 10_000), /in the future/],
      ["2999-01-01T00:00:00Z", /in the future/],
      [undefined, /missing/],
      ["last tuesday", /RFC 3339/],
    ];
    for (const type of ["user.reset", "user.deleted"]) {
      for (const [timestamp, why] of cases) {
        const payload =
          timestamp === undefined
            ? { type, data: { email: "henry@example.org" } }
            : event(type, "henry@example.org", timestamp);
        const answer = await postWebhook(j.url, payload);
        assert.equal(answer.status, 400, `${type} ${timestamp}: ${answer.body}`);
        assert.match(JSON.parse(answer.body).message, why);
      }
    }
    const refusals = j.logs.filter((l) => l.msg === "webhook with a stale timestamp refused");
    assert.equal(refusals.length, 2 * cases.length);
    assert.ok(refusals.every((l) => l.level === "warn"));
    await settle(1500);
    assert.deepEqual(readLines(j.csv), ["email,timestamp"]);
    assert.deepEqual(calls(dir), []);
    // just inside the window, either way: taken
    assert.equal(
      (await postWebhook(j.url, event("user.reset", "ivy@example.org", atom(-4 * 60_000)))).status,
      200,
    );
    assert.equal(
      (await postWebhook(j.url, event("user.reset", "jack@example.org", atom(4 * 60_000)))).status,
      200,
    );
    await waitFor("both purges", () => calls(dir).length === 2);
  });
});

describe("wildcards", () => {
  const masks = [
    "*@example.org",
    "a?b@example.org",
    "dave%@example.org",
    "star*@example.org",
    "a[b]@example.org",
  ];

  test("user.deleted and user.reset for an address a purge tool reads as a mask: 400, logged, never run", async () => {
    const dir = await directory();
    const j = await janitor(dir, { PURGER_RETENTION_HOURS: "0", PURGER_TICK_INTERVAL: "1s" });
    for (const type of ["user.deleted", "user.reset"]) {
      for (const email of masks) {
        const answer = await postWebhook(j.url, event(type, email));
        assert.equal(answer.status, 400, `${type} ${email}: ${answer.body}`);
        assert.match(JSON.parse(answer.body).message, /data\.email: /);
      }
    }
    const refused = j.logs.filter((l) => l.msg === "webhook with unacceptable address refused");
    assert.equal(refused.length, 2 * masks.length);
    assert.ok(
      refused
        .filter((l) => String(l["email"]) !== "a[b]@example.org")
        .every((l) => /wildcard/.test(String(l["reason"]))),
    );
    // a witness: a plain address in the same run is purged
    assert.equal((await postWebhook(j.url, event("user.deleted", "plain@example.org"))).status, 200);
    await waitFor("the witness purge", () => calls(dir).length === 1);
    await settle(1500);
    assert.deepEqual(calls(dir), ["plain@example.org|example.org|plain"]);
    assert.deepEqual(readLines(j.csv), ["email,timestamp"]);
  });

  test("a pending deletions file written by an older version with such lines: kept, logged, never run", async () => {
    const dir = await directory();
    writeFileSync(
      join(dir, "mailboxes.csv"),
      "email,timestamp\n*@example.org,2020-01-01T00:00:00Z\na?b@example.org,2020-01-01T00:00:00Z\nplain@example.org,2020-01-01T00:00:00Z\n",
    );
    const j = await janitor(dir, { PURGER_RETENTION_HOURS: "0", PURGER_TICK_INTERVAL: "1s" });
    await waitFor(
      "the plain line to be purged",
      () => calls(dir).length === 1 && readLines(j.csv).length === 3,
    );
    const ticks = j.logs.filter((line) => line.msg.startsWith("purge tick")).length;
    await waitFor(
      "two more ticks",
      () => j.logs.filter((l) => l.msg.startsWith("purge tick")).length >= ticks + 2,
    );
    assert.deepEqual(calls(dir), ["plain@example.org|example.org|plain"]);
    assert.deepEqual(readLines(j.csv), [
      "email,timestamp",
      "*@example.org,2020-01-01T00:00:00Z",
      "a?b@example.org,2020-01-01T00:00:00Z",
    ]);
    const warned = j.logs.filter(
      (l) => l.msg.startsWith("malformed line") && /wildcard/.test(String(l["reason"])),
    );
    assert.ok(warned.some((l) => l["content"] === "*@example.org,2020-01-01T00:00:00Z"));
    assert.ok(warned.some((l) => l["content"] === "a?b@example.org,2020-01-01T00:00:00Z"));
    assert.equal(existsSync(join(dir, "calls")), true);
  });
});
