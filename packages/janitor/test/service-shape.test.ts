/**
 * The janitor behaves like the account service where an operator sees both: configuration errors
 * (all at once), log lines (one shape) and error answers ({"message": ...}).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Writable } from "node:stream";
import { after, describe, test } from "node:test";
import { createLogger as createServiceLogger } from "../../service/src/logger.ts";
import { ConfigError, loadConfig } from "../src/config.ts";
import { createLogger } from "../src/logger.ts";
import { cleanup, janitorBin, postWebhook, repoRoot, startJanitor, tempDir } from "./helpers.ts";

const required = ["WEBHOOK_SECRET", "USERLI_URL", "USERLI_TOKEN", "TOUCHER_SIEVE_LOCATION"];

describe("configuration errors: every problem in one error", () => {
  test("all missing required variables are named, in one ConfigError", () => {
    assert.throws(
      () => loadConfig({}),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message === required.map((name) => `${name}: is required but not set`).join("; ") &&
        error.problems.map((p) => p.variable).join(",") === required.join(","),
    );
  });

  test("missing and invalid variables together", () => {
    assert.throws(
      () => loadConfig({ USERLI_URL: "ftp://x", TOUCHER_SIEVE_LOCATION: "/s", LOG_LEVEL: "loud" }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.problems.map((p) => p.variable).join(",") ===
          "WEBHOOK_SECRET,USERLI_URL,USERLI_TOKEN,LOG_LEVEL",
    );
  });

  test("the daemon prints them in one line and exits 78", () => {
    const result = spawnSync(janitorBin, [], {
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", PURGER_TICK_INTERVAL: "abc" },
      encoding: "utf8",
      timeout: 20_000,
    });
    assert.equal(result.status, 78);
    assert.equal(result.stderr.split("\n").length, 2, result.stderr);
    for (const name of [...required, "PURGER_TICK_INTERVAL"])
      assert.match(result.stderr, new RegExp(`${name}: `));
  });
});

describe("log lines have the service's shape", () => {
  const capture = (make: (stream: Writable) => { info: (o: object, m: string) => void }) => {
    let text = "";
    const stream = new Writable({
      write(chunk, _encoding, done) {
        text += String(chunk);
        done();
      },
    });
    make(stream).info({ component: "x" }, "hello");
    return JSON.parse(text.trim()) as Record<string, unknown>;
  };

  test("the same fields of the same types as the service's logger", () => {
    const janitor = capture((s) => createLogger("info", s));
    const service = capture((s) => createServiceLogger("info", s));
    const shape = (line: Record<string, unknown>) =>
      Object.fromEntries(Object.entries(line).map(([key, value]) => [key, typeof value]));
    assert.deepEqual(shape(janitor), shape(service));
    assert.equal(janitor["service"], "mailbox-janitor");
    assert.equal(janitor["level"], 30);
  });

  let dir: string | undefined;
  after(async () => {
    if (dir) await cleanup(dir);
  });

  test("the running daemon writes them", async () => {
    dir = await tempDir();
    const janitor = await startJanitor({ dir });
    try {
      const first = janitor
        .output()
        .split("\n")
        .find((line) => line.includes('"listening"'));
      const line = JSON.parse(first ?? "{}") as Record<string, unknown>;
      assert.equal(typeof line["level"], "number");
      assert.equal(typeof line["time"], "number");
      assert.equal(line["service"], "mailbox-janitor");
      assert.equal(line["pid"], undefined);
      const { version } = JSON.parse(readFileSync(`${repoRoot}/packages/janitor/package.json`, "utf8"));
      assert.equal(line["version"], version);

      // Error answers are {"message": ...}, as the service's.
      const unsigned = await postWebhook(janitor.url, { type: "user.deleted" }, { secret: null });
      assert.equal(unsigned.status, 401);
      assert.deepEqual(JSON.parse(unsigned.body), { message: "missing X-Webhook-Signature" });
      const notJson = await postWebhook(janitor.url, "not json");
      assert.equal(notJson.status, 400);
      assert.equal(typeof JSON.parse(notJson.body).message, "string");
      const missing = await fetch(`${janitor.url}/nothing`);
      assert.equal(missing.status, 404);
      assert.deepEqual(await missing.json(), { message: "not found" });
      const wrongMethod = await fetch(`${janitor.url}/service`);
      assert.equal(wrongMethod.status, 405);
      assert.deepEqual(await wrongMethod.json(), { message: "method not allowed" });
    } finally {
      await janitor.stop();
    }
  });
});

test("bin/mailbox-janitor --version", () => {
  const result = spawnSync(janitorBin, ["--version"], { encoding: "utf8", timeout: 20_000 });
  assert.equal(result.status, 0);
  assert.match(result.stdout, /^mailbox-janitor \d+\.\d+\.\d+ \(Node\.js \d+\.\d+\.\d+\)\n$/);
});

test("docs/janitor.md recommends binding the mail server's private address, and says why", () => {
  const docs = readFileSync(`${repoRoot}/docs/janitor.md`, "utf8");
  assert.match(docs, /Bind the janitor to the mail server's private address/);
  assert.match(docs, /not to every\s+interface \(`:8080` or `0\.0\.0\.0:8080`/);
  assert.match(docs, /eavesdropping/);
});
