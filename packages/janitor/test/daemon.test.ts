/**
 * Integration tests: the real daemon (bin/mailbox-janitor) as a child process, on a free port, in a
 * temporary directory, with real purge commands run through /bin/sh.
 */
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import {
  atom,
  cleanup,
  csvEntries,
  event,
  type Janitor,
  postWebhook,
  processGone,
  readLines,
  readText,
  SECRET,
  sign,
  startJanitor,
  TOKEN,
  tempDir,
  waitFor,
} from "./helpers.ts";

const dirs: string[] = [];
after(() => cleanup(...dirs));

async function janitor(env: Record<string, string> = {}, dir?: string): Promise<Janitor> {
  const started = await startJanitor({ env, ...(dir === undefined ? {} : { dir }) });
  dirs.push(started.dir);
  return started;
}

/** A purge command that appends "email|domain|local_part" to <dir>/calls. */
function recordingCommand(dir: string, tail = ""): string {
  return `printf '%s|%s|%s\\n' {email} {domain} {local_part} >> '${join(dir, "calls")}'${tail}`;
}

describe("HTTP surface", () => {
  test("health, unknown paths and wrong methods", async () => {
    const j = await janitor();
    const health = await fetch(`${j.url}/health`);
    assert.equal(health.status, 200);
    assert.match(health.headers.get("content-type") ?? "", /^text\/plain/);
    assert.equal(await health.text(), "OK");
    assert.equal((await fetch(`${j.url}/health`, { method: "HEAD" })).status, 200);
    assert.equal((await fetch(`${j.url}/health`, { method: "POST" })).status, 405);
    const get = await fetch(`${j.url}/service`);
    assert.equal(get.status, 405);
    assert.equal(get.headers.get("allow"), "POST");
    assert.equal((await fetch(`${j.url}/nope`)).status, 404);
    assert.equal((await fetch(`${j.url}/health?probe=1`)).status, 200);
  });
});

describe("webhook signature", () => {
  test("unsigned, wrongly signed and malformed signatures get 401 and change nothing", async () => {
    const j = await janitor();
    const payload = event("user.deleted", "alice@example.org");
    const unsigned = await postWebhook(j.url, payload, { secret: null });
    assert.equal(unsigned.status, 401);
    assert.equal((await postWebhook(j.url, payload, { secret: "wrong-secret" })).status, 401);
    assert.equal((await postWebhook(j.url, payload, { signature: "abc" })).status, 401);
    assert.equal((await postWebhook(j.url, payload, { signature: "" })).status, 401);
    // signed over different bytes than those sent
    const body = JSON.stringify(payload);
    assert.equal((await postWebhook(j.url, `${body} `, { signature: sign(body) })).status, 401);
    // 401 comes before any parsing: an unsigned garbage body is 401, not 400
    assert.equal((await postWebhook(j.url, "not json", { secret: null })).status, 401);
    assert.deepEqual(readLines(j.csv), ["email,timestamp"]);
  });

  test("the signature covers the exact raw bytes, whatever their layout", async () => {
    const j = await janitor();
    const at = atom(-60_000);
    const body = `{ "data" : {"email":"alice@example.org"},\n "timestamp":"${at}", "type":"user.deleted" }`;
    const answer = await postWebhook(j.url, body, { signature: sign(body).toUpperCase() });
    assert.equal(answer.status, 200, answer.body);
    assert.deepEqual(readLines(j.csv), ["email,timestamp", `alice@example.org,${at.replace("+00:00", "Z")}`]);
  });

  test("neither the secret nor the token is ever logged", async () => {
    const j = await janitor();
    await postWebhook(j.url, event("user.deleted", "alice@example.org"));
    await postWebhook(j.url, event("user.deleted", "bob@example.org"), { secret: "wrong" });
    await j.stop();
    assert.ok(j.logs.length > 3);
    assert.doesNotMatch(j.output(), new RegExp(SECRET));
    assert.doesNotMatch(j.output(), new RegExp(TOKEN));
  });
});

describe("webhook payloads", () => {
  test("malformed bodies, missing or unacceptable addresses: 400; other events: 200 and ignored", async () => {
    const dir = await tempDir();
    const j = await janitor({ PURGER_COMMAND: recordingCommand(dir), PURGER_RETENTION_HOURS: "0" }, dir);
    for (const body of ["not json", "[]", "null", '"x"', "{}", '{"type":1}', '{"type":"user.deleted"}']) {
      const answer = await postWebhook(j.url, body);
      assert.equal(answer.status, 400, `${body}: ${answer.body}`);
      assert.match(answer.headers.get("content-type") ?? "", /json/);
    }
    for (const email of [
      undefined,
      "",
      "alice",
      "a$(touch pwned)@b",
      "a/b@example.org",
      "a b@example.org",
      42,
    ]) {
      const answer = await postWebhook(j.url, { type: "user.deleted", timestamp: atom(), data: { email } });
      assert.equal(answer.status, 400, `${String(email)}: ${answer.body}`);
    }
    assert.equal((await postWebhook(j.url, event("user.reset", "a$(touch pwned)@b"))).status, 400);
    const created = await postWebhook(j.url, event("user.created", "alice@example.org"));
    assert.equal(created.status, 200);
    assert.match(created.body, /ignored/);
    assert.equal((await postWebhook(j.url, { type: "something.else", data: {} })).status, 200);
    assert.deepEqual(readLines(j.csv), ["email,timestamp"]);
    assert.equal(existsSync(join(j.dir, "pwned")), false);
    assert.equal(existsSync(join(dir, "calls")), false);
  });

  test("bodies over 64 KiB get 413", async () => {
    const j = await janitor();
    const big = JSON.stringify({
      type: "user.deleted",
      data: { email: "alice@example.org", pad: "x".repeat(70_000) },
    });
    const answer = await postWebhook(j.url, big);
    assert.equal(answer.status, 413);
    assert.deepEqual(readLines(j.csv), ["email,timestamp"]);
  });

  test("user.deleted records the event's fresh timestamp, or the receipt time when it is a little ahead", async () => {
    const j = await janitor();
    const given = atom(-120_000);
    assert.equal((await postWebhook(j.url, event("user.deleted", "given@example.org", given))).status, 200);
    const before = Date.now() - 1000;
    assert.equal(
      (await postWebhook(j.url, event("user.deleted", "ahead@example.org", atom(120_000)))).status,
      200,
    );
    const after = Date.now() + 1000;
    const { header, rows } = csvEntries(j.csv);
    assert.equal(header, "email,timestamp");
    assert.deepEqual(rows[0], ["given@example.org", given.replace("+00:00", "Z")]);
    assert.equal(rows[1]?.[0], "ahead@example.org");
    const at = Date.parse(rows[1]?.[1] ?? "");
    assert.ok(at >= before && at <= after, rows[1]?.[1]);
    assert.equal(rows.length, 2);
  });

  test("a second event for the same address adds no second line; a re-delivery is recognised", async () => {
    const j = await janitor();
    const started = Date.now();
    const first = await postWebhook(
      j.url,
      event("user.deleted", "alice@example.org", atom(-60_000, started)),
    );
    assert.equal(first.status, 200);
    const again = await postWebhook(j.url, event("user.deleted", "Alice@Example.org", atom(-30_000)));
    assert.equal(again.status, 200);
    assert.match(again.body, /already pending/);
    const payload = event("user.deleted", "bob@example.org");
    assert.equal((await postWebhook(j.url, payload, { id: "01HZX" })).status, 200);
    const redelivered = await postWebhook(j.url, payload, { id: "01HZX" });
    assert.equal(redelivered.status, 200);
    assert.match(redelivered.body, /duplicate delivery/);
    const { rows } = csvEntries(j.csv);
    assert.deepEqual(
      rows.map((r) => r[0]),
      ["alice@example.org", "bob@example.org"],
    );
    assert.equal(rows[0]?.[1], atom(-60_000, started).replace("+00:00", "Z"));
  });

  test("200 concurrent user.deleted webhooks leave exactly 200 lines", async () => {
    const j = await janitor();
    const emails = Array.from({ length: 200 }, (_, i) => `user${i}@example.org`);
    const answers = await Promise.all(
      emails.map((email) => postWebhook(j.url, event("user.deleted", email))),
    );
    assert.deepEqual(
      answers.map((a) => a.status),
      emails.map(() => 200),
    );
    const { header, rows } = csvEntries(j.csv);
    assert.equal(header, "email,timestamp");
    assert.equal(rows.length, 200);
    assert.deepEqual(rows.map((r) => r[0]).sort(), [...emails].sort());
  });
});

describe("purging", () => {
  test("a purge tick runs the command with quoted arguments and removes the entries", async () => {
    const dir = await tempDir();
    const j = await janitor(
      { PURGER_COMMAND: recordingCommand(dir), PURGER_RETENTION_HOURS: "0", PURGER_TICK_INTERVAL: "1s" },
      dir,
    );
    for (const email of ["first.last+tag@example.org", "bob@sub.example.net"]) {
      assert.equal((await postWebhook(j.url, event("user.deleted", email))).status, 200);
    }
    const calls = await waitFor("both purges", () => {
      const lines = readLines(join(dir, "calls"));
      return lines.length >= 2 ? lines : null;
    });
    assert.deepEqual(calls.sort(), [
      "bob@sub.example.net|sub.example.net|bob",
      "first.last+tag@example.org|example.org|first.last+tag",
    ]);
    await waitFor("the entries to be removed", () => readLines(j.csv).length === 1);
    assert.deepEqual(readLines(j.csv), ["email,timestamp"]);
    await j.waitForLog("a purged log line", (line) => line.msg === "mailbox purged");
  });

  test("entries not yet due are left alone", async () => {
    const dir = await tempDir();
    // an old deletion, recorded before this start (a webhook's own timestamp is always fresh)
    writeFileSync(join(dir, "mailboxes.csv"), "email,timestamp\nold@example.org,2020-01-01T00:00:00Z\n");
    const j = await janitor(
      { PURGER_COMMAND: recordingCommand(dir), PURGER_RETENTION_HOURS: "24", PURGER_TICK_INTERVAL: "1s" },
      dir,
    );
    await postWebhook(j.url, event("user.deleted", "recent@example.org"));
    await waitFor("the old entry to be purged", () => readLines(join(dir, "calls")).length === 1);
    const tick = j.logs.filter(
      (line) => line.msg === "purge tick done" || line.msg === "purge tick: nothing due",
    ).length;
    await waitFor(
      "two more ticks",
      () => j.logs.filter((line) => line.msg.startsWith("purge tick")).length >= tick + 2,
    );
    assert.deepEqual(readLines(join(dir, "calls")), ["old@example.org|example.org|old"]);
    assert.deepEqual(
      csvEntries(j.csv).rows.map((r) => r[0]),
      ["recent@example.org"],
    );
  });

  test("a failing command keeps the entry, logs its output and is retried on the next tick", async () => {
    const dir = await tempDir();
    const command = recordingCommand(dir, `; echo "doveadm says no" >&2; test -e '${join(dir, "ok")}'`);
    const j = await janitor(
      { PURGER_COMMAND: command, PURGER_RETENTION_HOURS: "0", PURGER_TICK_INTERVAL: "1s" },
      dir,
    );
    await postWebhook(j.url, event("user.deleted", "alice@example.org"));
    await waitFor("two attempts", () => readLines(join(dir, "calls")).length >= 2);
    const failure = await j.waitForLog("the failure log", (line) =>
      line.msg.startsWith("purge command failed"),
    );
    assert.equal(failure.level, "warn");
    assert.equal(failure["exitCode"], 1);
    assert.match(String(failure["stderr"]), /doveadm says no/);
    assert.deepEqual(
      csvEntries(j.csv).rows.map((r) => r[0]),
      ["alice@example.org"],
    );
    writeFileSync(join(dir, "ok"), "");
    await waitFor("the entry to be removed after a successful retry", () => readLines(j.csv).length === 1);
    assert.ok(readLines(join(dir, "calls")).every((line) => line === "alice@example.org|example.org|alice"));
  });

  test("a command that does not finish in time is killed and retried", async () => {
    const dir = await tempDir();
    const command = `echo $$ >> '${join(dir, "pids")}'; test -e '${join(dir, "ok")}' || sleep 60`;
    const j = await janitor(
      {
        PURGER_COMMAND: command,
        PURGER_COMMAND_TIMEOUT: "500ms",
        PURGER_RETENTION_HOURS: "0",
        PURGER_TICK_INTERVAL: "1s",
      },
      dir,
    );
    await postWebhook(j.url, event("user.deleted", "slow@example.org"));
    const timedOut = await j.waitForLog(
      "a timeout",
      (line) => line.msg.startsWith("purge command failed") && line["timedOut"] === true,
    );
    assert.equal(timedOut["timedOut"], true);
    const [pid] = readLines(join(dir, "pids")).map(Number);
    await waitFor("the killed shell to be gone", () => processGone(pid as number));
    assert.deepEqual(
      csvEntries(j.csv).rows.map((r) => r[0]),
      ["slow@example.org"],
    );
    writeFileSync(join(dir, "ok"), "");
    await waitFor("the retry to succeed", () => readLines(j.csv).length === 1);
  });

  test("a line deleted by hand is not purged", async () => {
    const dir = await tempDir();
    const j = await janitor(
      { PURGER_COMMAND: recordingCommand(dir), PURGER_RETENTION_HOURS: "1", PURGER_TICK_INTERVAL: "1s" },
      dir,
    );
    await postWebhook(j.url, event("user.deleted", "alice@example.org"));
    await postWebhook(j.url, event("user.deleted", "restored@example.org"));
    assert.equal(readLines(j.csv).length, 3);
    // The operator cancels one purge and, to have a witness tick, back-dates the other.
    const old = new Date(Date.now() - 2 * 3_600_000).toISOString();
    writeFileSync(j.csv, `email,timestamp\nalice@example.org,${old}\n`);
    await waitFor("alice to be purged", () => readLines(j.csv).length === 1);
    const purgedAfter = j.logs.filter((line) => line.msg.startsWith("purge tick")).length;
    await waitFor(
      "another tick",
      () => j.logs.filter((line) => line.msg.startsWith("purge tick")).length > purgedAfter,
    );
    assert.deepEqual(readLines(join(dir, "calls")), ["alice@example.org|example.org|alice"]);
    assert.equal(readText(j.csv).includes("restored"), false);
  });

  test("malformed lines are logged, kept verbatim and never purged", async () => {
    const dir = await tempDir();
    const csv = join(dir, "mailboxes.csv");
    writeFileSync(
      csv,
      "email,timestamp\nthis is not csv\nx$(touch pwned)@example.org,2020-01-01T00:00:00Z\nalice@example.org,2020-01-01T00:00:00Z\nbob@example.org,sometime\n",
    );
    const j = await janitor(
      { PURGER_COMMAND: recordingCommand(dir), PURGER_RETENTION_HOURS: "0", PURGER_TICK_INTERVAL: "1s" },
      dir,
    );
    await waitFor("alice to be purged", () => !readText(csv).includes("alice"));
    await postWebhook(j.url, event("user.deleted", "carol@example.org"));
    const warning = await j.waitForLog("a malformed-line warning", (line) =>
      line.msg.startsWith("malformed line"),
    );
    assert.equal(warning.level, "warn");
    assert.deepEqual(readLines(join(dir, "calls")).slice(0, 1), ["alice@example.org|example.org|alice"]);
    const lines = readLines(csv);
    assert.deepEqual(lines.slice(0, 4), [
      "email,timestamp",
      "this is not csv",
      "x$(touch pwned)@example.org,2020-01-01T00:00:00Z",
      "bob@example.org,sometime",
    ]);
    assert.equal(existsSync(join(dir, "pwned")), false);
  });
});

describe("user.reset", () => {
  test("runs the purge command at once", async () => {
    const dir = await tempDir();
    const j = await janitor({ PURGER_COMMAND: recordingCommand(dir), PURGER_RETENTION_HOURS: "24" }, dir);
    const answer = await postWebhook(j.url, event("user.reset", "alice@example.org"));
    assert.equal(answer.status, 200);
    await waitFor("the purge", () => readLines(join(dir, "calls")).length === 1);
    assert.deepEqual(readLines(join(dir, "calls")), ["alice@example.org|example.org|alice"]);
    await waitFor("the write-ahead entry to be removed", () => readLines(j.csv).length === 1);
  });

  test("an address older versions of the service created (o'brien@...) is purged, quoted", async () => {
    const dir = await tempDir();
    const j = await janitor({ PURGER_COMMAND: recordingCommand(dir), PURGER_RETENTION_HOURS: "24" }, dir);
    for (const email of ["o'brien@example.org", "a$b&c|d@example.org"]) {
      const answer = await postWebhook(j.url, event("user.reset", email));
      assert.equal(answer.status, 200, answer.body);
    }
    await waitFor("the purges", () => readLines(join(dir, "calls")).length === 2);
    assert.deepEqual(readLines(join(dir, "calls")).sort(), [
      "a$b&c|d@example.org|example.org|a$b&c|d",
      "o'brien@example.org|example.org|o'brien",
    ]);
  });

  test("a failing reset purge leaves the mailbox due now, and the next tick retries it", async () => {
    const dir = await tempDir();
    const command = recordingCommand(dir, `; test -e '${join(dir, "ok")}'`);
    const j = await janitor(
      { PURGER_COMMAND: command, PURGER_RETENTION_HOURS: "24", PURGER_TICK_INTERVAL: "2s" },
      dir,
    );
    const sent = Date.now();
    assert.equal((await postWebhook(j.url, event("user.reset", "alice@example.org"))).status, 200);
    await j.waitForLog("the failed reset purge", (line) => line.msg.startsWith("purge command failed"));
    const { rows } = csvEntries(j.csv);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.[0], "alice@example.org");
    // due now: its timestamp lies the whole retention period back
    assert.ok(Date.parse(rows[0]?.[1] ?? "") <= sent - 24 * 3_600_000 + 5000, rows[0]?.[1]);
    writeFileSync(join(dir, "ok"), "");
    await waitFor("the tick to retry and succeed", () => readLines(j.csv).length === 1);
    assert.ok(readLines(join(dir, "calls")).length >= 2);
  });
});

describe("shutdown", () => {
  test("SIGTERM exits 0", async () => {
    const j = await janitor();
    await postWebhook(j.url, event("user.deleted", "alice@example.org"));
    const { code, signal } = await j.stop("SIGTERM");
    assert.equal(code, 0);
    assert.equal(signal, null);
    assert.ok(j.logs.some((line) => line.msg === "stopped"));
  });

  test("SIGINT exits 0 too", async () => {
    const j = await janitor();
    assert.equal((await j.stop("SIGINT")).code, 0);
  });

  test("SIGTERM during a purge lets the command finish and records its result", async () => {
    const dir = await tempDir();
    const command = `touch '${join(dir, "started")}'; sleep 1; ${recordingCommand(dir)}`;
    const j = await janitor({ PURGER_COMMAND: command, PURGER_RETENTION_HOURS: "24" }, dir);
    assert.equal((await postWebhook(j.url, event("user.reset", "alice@example.org"))).status, 200);
    await waitFor("the command to start", () => existsSync(join(dir, "started")));
    const { code } = await j.stop("SIGTERM");
    assert.equal(code, 0);
    assert.deepEqual(readLines(join(dir, "calls")), ["alice@example.org|example.org|alice"]);
    assert.deepEqual(readLines(j.csv), ["email,timestamp"]);
  });
});
