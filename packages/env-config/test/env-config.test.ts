import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  ConfigError,
  ConfigReader,
  formatDuration,
  formatListenAddress,
  parseBoolean,
  parseDuration,
  parseListenAddress,
  parseLogLevel,
  serviceUrlParser,
} from "../src/env-config.ts";

describe("durations", () => {
  test("parses h, m, s, ms and combinations", () => {
    assert.equal(parseDuration("24h"), 24 * 3_600_000);
    assert.equal(parseDuration("90m"), 90 * 60_000);
    assert.equal(parseDuration("1h30m"), 90 * 60_000);
    assert.equal(parseDuration("45s"), 45_000);
    assert.equal(parseDuration("1h30m15s"), 5_415_000);
    assert.equal(parseDuration("250ms"), 250);
    assert.equal(parseDuration("1m500ms"), 60_500);
    assert.equal(parseDuration("1.5h"), 5_400_000);
    assert.equal(parseDuration(" 10s "), 10_000);
    assert.equal(parseDuration("720h"), 720 * 3_600_000);
  });

  test("rejects empty, zero, unit-less and garbage", () => {
    for (const bad of [
      "",
      " ",
      "0s",
      "0h0m",
      "10",
      "abc",
      "1d",
      "h",
      "-5m",
      "1h 30m",
      "1H",
      "5 s",
      "1.h",
      "m5",
    ]) {
      assert.throws(() => parseDuration(bad), Error, JSON.stringify(bad));
    }
    assert.throws(() => parseDuration("soon", "2s, 500ms"), {
      message: 'invalid duration "soon" (use e.g. 2s, 500ms)',
    });
  });

  test("formats back for logs", () => {
    assert.equal(formatDuration(5_415_000), "1h30m15s");
    assert.equal(formatDuration(250), "250ms");
    assert.equal(formatDuration(3_600_000), "1h");
  });
});

describe("listen addresses, booleans, log levels, the service's URL", () => {
  test("listen address forms", () => {
    assert.deepEqual(parseListenAddress(":8080"), { host: undefined, port: 8080 });
    assert.deepEqual(parseListenAddress("127.0.0.1:9000"), { host: "127.0.0.1", port: 9000 });
    assert.deepEqual(parseListenAddress("localhost:1"), { host: "localhost", port: 1 });
    assert.deepEqual(parseListenAddress("[::1]:8080"), { host: "::1", port: 8080 });
    assert.deepEqual(parseListenAddress("0.0.0.0:0"), { host: "0.0.0.0", port: 0 });
    for (const bad of ["8080", "host", ":", ":99999", "::1:8080", "[::1]", "a b:80", "host:port"]) {
      assert.throws(() => parseListenAddress(bad), Error, bad);
    }
    assert.equal(formatListenAddress({ host: "::1", port: 12 }), "[::1]:12");
    assert.equal(formatListenAddress({ host: undefined, port: 13 }), ":13");
  });

  test("booleans and log levels", () => {
    assert.equal(parseBoolean("true"), true);
    assert.equal(parseBoolean("TRUE"), true);
    assert.equal(parseBoolean("1"), true);
    assert.equal(parseBoolean("false"), false);
    assert.equal(parseBoolean("0"), false);
    assert.throws(() => parseBoolean("yes"));
    assert.equal(parseLogLevel(" Debug "), "debug");
    assert.throws(() => parseLogLevel("verbose"), /invalid log level "verbose"/);
  });

  test("the service's URL: no trailing slash, a path prefix kept, no credentials", () => {
    const parse = serviceUrlParser("THE_TOKEN");
    assert.equal(parse(" https://accounts.example.org/ "), "https://accounts.example.org");
    assert.equal(parse("http://service:8000/prefix//"), "http://service:8000/prefix");
    assert.throws(() => parse("https://user:pw@x"), /the token goes into THE_TOKEN/);
    for (const bad of ["ftp://x", "not a url", "https://x/?a=1", "https://x/#f"]) {
      assert.throws(() => parse(bad), Error, bad);
    }
  });
});

describe("ConfigReader", () => {
  test("empty or blank counts as unset: the default, or a missing required variable", () => {
    for (const value of [undefined, "", "  "]) {
      const read = new ConfigReader({ NAME: value, PORT: value, REDIS: value });
      assert.equal(read.optional("PORT", "80", Number), 80);
      assert.equal(read.optionalOrNull("REDIS", String), null);
      assert.equal(read.required("NAME"), undefined);
      assert.throws(() => read.done(), { message: "NAME: is required but not set" });
    }
  });

  test("values as they stand or parsed", () => {
    const read = new ConfigReader({ NAME: " x ", PORT: "81", REDIS: "redis://r" });
    assert.equal(read.required("NAME"), " x ");
    assert.equal(
      read.required("NAME", (text) => text.trim()),
      "x",
    );
    assert.equal(read.optional("PORT", "80", Number), 81);
    assert.equal(read.optional("OTHER", "fallback"), "fallback");
    assert.equal(
      read.optionalOrNull("REDIS", (text) => text.toUpperCase()),
      "REDIS://R",
    );
    read.done();
  });

  test("every problem is collected, in the order read, into one ConfigError", () => {
    const read = new ConfigReader({ A: "bad", C: "" });
    read.optional("A", "1", parseBoolean);
    read.optional("B", "ok", String);
    read.required("C");
    assert.throws(
      () => read.done(),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.variable === "A" &&
        error.problems.map((problem) => problem.variable).join(",") === "A,C" &&
        error.message === 'A: invalid boolean "bad" (use true, false, 1 or 0); C: is required but not set',
    );
  });
});
