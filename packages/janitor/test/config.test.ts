import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { assertEmptyIsMissing } from "../../env-config/test/same-answers.ts";
import { ConfigError, loadConfig } from "../src/config.ts";
import { janitorBin } from "./helpers.ts";

const base = {
  WEBHOOK_SECRET: "s3cret",
  USERLI_URL: "https://accounts.example.org/",
  USERLI_TOKEN: "token",
  TOUCHER_SIEVE_LOCATION: "/var/vmail/{domain}/{local_part}/.dovecot.sieve",
};

describe("loadConfig", () => {
  test("applies the spec's defaults", () => {
    const config = loadConfig(base);
    assert.equal(config.userliUrl, "https://accounts.example.org");
    assert.equal(config.toucherUseSudo, false);
    assert.equal(config.toucherTickIntervalMs, 24 * 3_600_000);
    assert.equal(config.purgerCommand, "true");
    assert.equal(config.purgerCommandTimeoutMs, 10 * 60_000);
    assert.equal(config.purgerRetentionHours, 24);
    assert.equal(config.purgerTickIntervalMs, 3_600_000);
    assert.equal(config.purgerDatabasePath, "./mailboxes.csv");
    assert.deepEqual(config.listen, { host: undefined, port: 8080 });
    assert.equal(config.logLevel, "info");
  });

  test("reads every variable", () => {
    const config = loadConfig({
      ...base,
      USERLI_URL: "http://service:8000/prefix/",
      TOUCHER_USE_SUDO: "1",
      TOUCHER_TICK_INTERVAL: "12h",
      PURGER_COMMAND: "doveadm purge -u {email}",
      PURGER_COMMAND_TIMEOUT: "30s",
      PURGER_RETENTION_HOURS: "0",
      PURGER_TICK_INTERVAL: "90m",
      PURGER_DATABASE_PATH: "/var/lib/janitor/mailboxes.csv",
      LISTEN_ADDR: "[::1]:8081",
      LOG_LEVEL: "debug",
    });
    assert.equal(config.userliUrl, "http://service:8000/prefix");
    assert.equal(config.toucherUseSudo, true);
    assert.equal(config.toucherTickIntervalMs, 12 * 3_600_000);
    assert.equal(config.purgerCommandTimeoutMs, 30_000);
    assert.equal(config.purgerRetentionHours, 0);
    assert.equal(config.purgerTickIntervalMs, 90 * 60_000);
    assert.deepEqual(config.listen, { host: "::1", port: 8081 });
    assert.equal(config.logLevel, "debug");
  });

  test("an empty variable is a missing one (the default, or required but not set), as in the service", () => {
    assertEmptyIsMissing(loadConfig, base, {
      WEBHOOK_SECRET: null,
      USERLI_URL: "ftp://x",
      USERLI_TOKEN: null,
      TOUCHER_SIEVE_LOCATION: null,
      TOUCHER_USE_SUDO: "maybe",
      TOUCHER_TICK_INTERVAL: "0s",
      PURGER_COMMAND: null,
      PURGER_COMMAND_TIMEOUT: "10",
      PURGER_RETENTION_HOURS: "-1",
      PURGER_TICK_INTERVAL: "abc",
      PURGER_DATABASE_PATH: null,
      LISTEN_ADDR: "8080",
      LOG_LEVEL: "verbose",
    });
    assert.equal(loadConfig({ ...base, PURGER_COMMAND: " " }).purgerCommand, "true");
  });

  const errors: [env: Record<string, string | undefined>, variable: string][] = [
    [{ ...base, WEBHOOK_SECRET: undefined }, "WEBHOOK_SECRET"],
    [{ ...base, WEBHOOK_SECRET: "" }, "WEBHOOK_SECRET"],
    [{ ...base, USERLI_URL: undefined }, "USERLI_URL"],
    [{ ...base, USERLI_URL: "ftp://x" }, "USERLI_URL"],
    [{ ...base, USERLI_URL: "not a url" }, "USERLI_URL"],
    [{ ...base, USERLI_URL: "https://user:pw@x" }, "USERLI_URL"],
    [{ ...base, USERLI_TOKEN: undefined }, "USERLI_TOKEN"],
    [{ ...base, TOUCHER_SIEVE_LOCATION: undefined }, "TOUCHER_SIEVE_LOCATION"],
    [{ ...base, TOUCHER_USE_SUDO: "maybe" }, "TOUCHER_USE_SUDO"],
    [{ ...base, TOUCHER_TICK_INTERVAL: "0s" }, "TOUCHER_TICK_INTERVAL"],
    [{ ...base, PURGER_TICK_INTERVAL: "abc" }, "PURGER_TICK_INTERVAL"],
    [{ ...base, PURGER_COMMAND_TIMEOUT: "10" }, "PURGER_COMMAND_TIMEOUT"],
    [{ ...base, PURGER_RETENTION_HOURS: "-1" }, "PURGER_RETENTION_HOURS"],
    [{ ...base, PURGER_RETENTION_HOURS: "24h" }, "PURGER_RETENTION_HOURS"],
    [{ ...base, LISTEN_ADDR: "8080" }, "LISTEN_ADDR"],
    [{ ...base, LOG_LEVEL: "verbose" }, "LOG_LEVEL"],
  ];
  for (const [env, variable] of errors) {
    test(`error names ${variable} (${JSON.stringify(env[variable])})`, () => {
      assert.throws(
        () => loadConfig(env),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.variable === variable &&
          error.message.startsWith(`${variable}: `),
      );
    });
  }
});

describe("daemon start with a bad configuration", () => {
  const run = (env: Record<string, string>) =>
    spawnSync(janitorBin, [], {
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...env },
      encoding: "utf8",
      timeout: 20_000,
    });

  test("an invalid duration stops it with one line naming the variable", () => {
    const result = run({ ...base, PURGER_TICK_INTERVAL: "abc" });
    assert.notEqual(result.status, 0);
    assert.equal(result.stdout, "");
    assert.equal(
      result.stderr,
      'config error: PURGER_TICK_INTERVAL: invalid duration "abc" (use e.g. 24h, 90m, 1h30m, 45s)\n',
    );
  });

  test("a missing or empty required variable stops it with one line", () => {
    const { WEBHOOK_SECRET: _unused, ...rest } = base;
    for (const env of [rest, { ...rest, WEBHOOK_SECRET: "" }]) {
      const result = run(env);
      assert.notEqual(result.status, 0);
      assert.equal(result.stderr, "config error: WEBHOOK_SECRET: is required but not set\n");
    }
  });

  test("the secret never appears in a config error", () => {
    const result = run({ ...base, WEBHOOK_SECRET: "do-not-print-me", LOG_LEVEL: "loud" });
    assert.notEqual(result.status, 0);
    assert.equal(result.stderr.split("\n").length, 2);
    assert.match(result.stderr, /^config error: LOG_LEVEL: /);
    assert.doesNotMatch(result.stderr + result.stdout, /do-not-print-me/);
  });
});
