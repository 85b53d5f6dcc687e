import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { Writable } from "node:stream";
import { describe, test } from "node:test";
import { assertEmptyIsMissing } from "../../env-config/test/same-answers.ts";
import { parseAddress, parseDomain } from "../src/accounts/addresses.ts";
import { effectiveRoles, isExemptFromInactivityDeletion, normalizeRoles } from "../src/accounts/roles.ts";
import { normalizeSetting } from "../src/accounts/settings.ts";
import { userNotFound } from "../src/accounts/users.ts";
import { ConfigError, configVariables, loadConfig, parseListenAddr, redactUrl } from "../src/config.ts";
import { ServiceError } from "../src/errors.ts";
import { andThen, isPromise } from "../src/http/integration/eventually.ts";
import { createLogger, RequestLogger } from "../src/logger.ts";
import { repoRoot } from "./helpers/process.ts";

describe("configuration", () => {
  test("defaults", () => {
    const config = loadConfig({});
    assert.deepEqual(config.listen, { host: "127.0.0.1", port: 8000 });
    assert.equal(config.databaseUrl, `sqlite:${repoRoot}var/data.sqlite`);
    assert.equal(config.logLevel, "info");
    assert.equal(config.metricsToken, null);
  });

  test("the default SQLite file is the repository's var/data.sqlite, whatever the working directory", () => {
    const configModule = new URL("../src/config.ts", import.meta.url).href;
    const script = `const { loadConfig } = await import(${JSON.stringify(configModule)}); console.log(loadConfig({}).databaseUrl);`;
    for (const cwd of [repoRoot, tmpdir(), `${repoRoot}packages/service`]) {
      const url = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
        cwd,
        encoding: "utf8",
      }).trim();
      assert.equal(url, `sqlite:${repoRoot}var/data.sqlite`, cwd);
    }
    // An explicit relative path is the operator's: relative to the working directory, as given.
    assert.equal(loadConfig({ DATABASE_URL: "sqlite:./mine.sqlite" }).databaseUrl, "sqlite:./mine.sqlite");
  });

  test("an empty or blank variable counts as unset, for every variable", () => {
    const names = configVariables;
    const defaults = loadConfig({});
    for (const value of ["", "  "]) {
      assert.deepEqual(loadConfig(Object.fromEntries(names.map((n) => [n, value]))), defaults);
      for (const name of names) assert.deepEqual(loadConfig({ [name]: value }), defaults, name);
    }
    assert.deepEqual(defaults.webhookRetryDelays, [10, 60, 180]);
    assert.equal(defaults.databasePreparedStatements, true);
    assert.equal(loadConfig({ DATABASE_PREPARED_STATEMENTS: "off" }).databasePreparedStatements, false);
    assert.throws(
      () => loadConfig({ DATABASE_PREPARED_STATEMENTS: "maybe" }),
      /DATABASE_PREPARED_STATEMENTS:/,
    );
    assert.deepEqual(loadConfig({ WEBHOOK_RETRY_DELAYS: "none" }).webhookRetryDelays, [], "no retries");
    assert.deepEqual(loadConfig({ WEBHOOK_RETRY_DELAYS: "5, 7" }).webhookRetryDelays, [5, 7]);
    assert.throws(() => loadConfig({ WEBHOOK_RETRY_DELAYS: "soon" }), /WEBHOOK_RETRY_DELAYS:/);
  });

  test("an empty variable is a missing one, a bad one names it: the rule of the janitor and the adapter too", () => {
    const badValues: Record<(typeof configVariables)[number], string | null> = {
      LISTEN_ADDR: "8000",
      DATABASE_URL: "mongodb://x",
      DATABASE_POOL_SIZE: "0",
      DATABASE_PREPARED_STATEMENTS: "maybe",
      LOG_LEVEL: "chatty",
      METRICS_TOKEN: null,
      CRYPTO_POOL_SIZE: "-1",
      JOBS_ENABLED: "maybe",
      WEBHOOK_RETRY_DELAYS: "soon",
      USERLI_COMPAT: "maybe",
      TRUST_PROXY: "proxy.example",
      REQUEST_TIMEOUT: "1m",
      CONNECTION_TIMEOUT: "-5",
      WEB_ENABLED: "maybe",
      PWNED_PASSWORDS_URL: "not a url",
      SMTP_URL: "http://relay",
      INSTALLATION_SECRET: "too short",
      INSTALLATION_SECRET_FILE: null,
    };
    assertEmptyIsMissing(loadConfig, {}, badValues);
  });

  test("listen addresses", () => {
    assert.deepEqual(parseListenAddr(":8080"), { host: "0.0.0.0", port: 8080 });
    assert.deepEqual(parseListenAddr("[::1]:9000"), { host: "::1", port: 9000 });
    assert.deepEqual(parseListenAddr("0.0.0.0:80"), { host: "0.0.0.0", port: 80 });
    for (const bad of ["8000", "host:", "host:99999", "a:b"])
      assert.throws(() => parseListenAddr(bad), ConfigError, bad);
  });

  test("bad values name the variable", () => {
    assert.throws(
      () => loadConfig({ LOG_LEVEL: "chatty" }),
      (e: unknown) => e instanceof ConfigError && e.message.startsWith("LOG_LEVEL:"),
    );
    assert.throws(() => loadConfig({ DATABASE_URL: "mongodb://x" }), /DATABASE_URL:/);
    assert.throws(() => loadConfig({ DATABASE_POOL_SIZE: "0" }), /DATABASE_POOL_SIZE:/);
    assert.equal(loadConfig({ DATABASE_URL: "sqlite::memory:" }).databaseUrl, "sqlite::memory:");
  });

  test("connection URLs are printed without their password", () => {
    assert.equal(redactUrl("postgres://app:s3cret@db:5432/mail"), "postgres://app:***@db:5432/mail");
    assert.equal(redactUrl("sqlite:./var/data.sqlite"), "sqlite:./var/data.sqlite");
  });
});

describe("addresses", () => {
  test("valid addresses are lower-cased and split", () => {
    assert.deepEqual(parseAddress("Alice.B+tag@Example.ORG"), {
      email: "alice.b+tag@example.org",
      localPart: "alice.b+tag",
      domain: "example.org",
    });
    assert.equal(parseAddress("ü@bücher.de")?.email, "ü@bücher.de");
    assert.equal(parseAddress("*@example.org")?.email, "*@example.org");
  });

  test("anything that cannot be a mailbox address is refused", () => {
    for (const bad of [
      "",
      "*",
      "@",
      "a@",
      "@b.org",
      "a@b@c.org",
      "a b@c.org",
      "a\u0000@b.org",
      "a@b",
      ".a@b.org",
      "a..b@c.org",
      `${"a".repeat(65)}@b.org`,
      `a@${"b".repeat(250)}.org`,
      "a@-b.org",
      'a"b@c.org',
    ]) {
      assert.equal(parseAddress(bad), null, JSON.stringify(bad));
    }
    assert.equal(parseDomain("Example.ORG"), "example.org");
    assert.equal(parseDomain("localhost"), null);
    assert.equal(parseDomain("a_b.org"), null);
  });
});

describe("roles", () => {
  test("ROLE_USER is always there; implied roles are derived", () => {
    assert.deepEqual(normalizeRoles(["ROLE_ADMIN"]), ["ROLE_USER", "ROLE_ADMIN"]);
    assert.ok(effectiveRoles(["ROLE_SPAM"]).has("ROLE_SUSPICIOUS"));
    assert.ok(effectiveRoles(["ROLE_ADMIN"]).has("ROLE_DOMAIN_ADMIN"));
    assert.equal(isExemptFromInactivityDeletion(["ROLE_USER", "ROLE_ADMIN"]), true);
    assert.equal(isExemptFromInactivityDeletion(["ROLE_USER", "ROLE_PERMANENT"]), true);
    assert.equal(isExemptFromInactivityDeletion(["ROLE_USER", "ROLE_SPAM"]), false);
  });
});

describe("settings validation", () => {
  test("values are normalized to their stored form", () => {
    assert.equal(normalizeSetting("mail_crypt", 3), "3");
    assert.equal(normalizeSetting("mail_crypt", "1"), "1");
    assert.equal(normalizeSetting("weekly_report_enabled", false), "0");
    assert.equal(normalizeSetting("postmaster_address", ""), "");
    assert.equal(normalizeSetting("mta_sts_mode", "enforce"), "enforce");
    // An address of a host with a dot in its name, or localhost (tried out on one machine).
    for (const url of [
      "https://users.example.org",
      "http://localhost:8000",
      "http://127.0.0.1:8000/",
      "http://[::1]:8000",
    ])
      assert.equal(normalizeSetting("app_url", url), url);
  });

  test("invalid values name the setting", () => {
    const cases: [string, unknown][] = [
      ["mail_crypt", 4],
      ["mail_crypt", "two"],
      ["mta_sts_max_age", 60],
      ["mta_sts_mode", "strict"],
      ["postmaster_address", "not an address"],
      ["app_url", "ftp://x"],
      ["app_url", "https://intranet"],
      ["app_url", "https://exa mple.org"],
      ["app_url", "https://.."],
      ["app_name", ""],
      ["nonexistent", "1"],
      ["smtp_quota_limit_per_day", -1],
    ];
    for (const [name, value] of cases) {
      assert.throws(
        () => normalizeSetting(name, value),
        (error: unknown) =>
          error instanceof ServiceError && error.kind === "invalid" && error.message.includes(name),
        `${name}=${String(value)}`,
      );
    }
  });
});

describe("request logger", () => {
  const collect = () => {
    const lines: Record<string, unknown>[] = [];
    const destination = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split("\n")) if (line !== "") lines.push(JSON.parse(line));
        done();
      },
    });
    return { lines, logger: createLogger("info", destination) };
  };

  test("writes with the request's bindings and the parent's redaction, only at enabled levels", () => {
    const { lines, logger } = collect();
    const log = new RequestLogger(logger, { reqId: "req-7" }, {});
    log.debug({ route: "/x" }, "below the level");
    log.trace("below the level");
    assert.equal(log.isLevelEnabled("debug"), false);
    assert.equal(log.level, "info");
    assert.equal(lines.length, 0);
    log.info({ password: "hunter2", route: "/x" }, "hello");
    log.error({ err: new Error("boom") }, "failed");
    assert.equal(lines.length, 2);
    assert.equal(lines[0]?.reqId, "req-7");
    assert.equal(lines[0]?.msg, "hello");
    assert.equal(lines[0]?.password, "[redacted]");
    assert.equal(lines[1]?.reqId, "req-7");
    assert.equal((lines[1]?.err as { message?: string } | undefined)?.message, "boom");
    log.child({ job: "j" }).warn("from a child");
    assert.deepEqual([lines[2]?.reqId, lines[2]?.job, lines[2]?.msg], ["req-7", "j", "from a child"]);
  });

  test("a level set on it applies to it alone", () => {
    const { lines, logger } = collect();
    const log = new RequestLogger(logger, { reqId: "req-8" }, {});
    log.level = "debug";
    log.debug("now written");
    new RequestLogger(logger, { reqId: "req-9" }, {}).debug("still not");
    assert.deepEqual(
      lines.map((line) => [line.reqId, line.msg]),
      [["req-8", "now written"]],
    );
  });
});

describe("service errors", () => {
  test("carry code, kind and the APIs' text but no stack, and leave the stack limit as it was", () => {
    const before = Error.stackTraceLimit;
    const error = userNotFound();
    assert.equal(error.code, "user.not_found");
    assert.equal(error.apiText(), "user not found");
    assert.ok(error instanceof ServiceError && error instanceof Error);
    assert.equal(error.kind, "not_found");
    assert.equal(error.message, "user not found");
    assert.doesNotMatch(error.stack ?? "", /\n\s+at /, "no stack frames were captured");
    assert.equal(Error.stackTraceLimit, before);
    assert.match(new Error("other").stack ?? "", /\n\s+at /, "other errors keep their stacks");
  });
});

describe("eventually (a value now, or a promise of it)", () => {
  test("a value now is passed on at once, without a promise", () => {
    const result = andThen(2, (n) => n * 3);
    assert.equal(isPromise(result), false);
    assert.equal(result, 6);
  });

  test("a promise is passed on when it resolves", async () => {
    const result = andThen(Promise.resolve(2), (n) => n * 3);
    assert.equal(isPromise(result), true);
    assert.equal(await result, 6);
  });

  test("an error thrown for a value now is thrown at once; for a promise, it rejects", async () => {
    const fail = (): number => {
      throw userNotFound();
    };
    assert.throws(() => andThen(1, fail), /user not found/);
    await assert.rejects(async () => andThen(Promise.resolve(1), fail), /user not found/);
  });
});
