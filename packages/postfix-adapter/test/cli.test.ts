/**
 * The program as an operator meets it: --help, --version, configuration errors, listeners switched
 * off, /health and /metrics, shutdown, and the systemd unit.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { assertEmptyIsMissing } from "../../env-config/test/same-answers.ts";
import { loadConfig } from "../src/config.ts";
import {
  type Adapter,
  adapterBin,
  b64,
  Connection,
  PolicyClient,
  password,
  repoRoot,
  SaslClient,
  type Service,
  SocketmapClient,
  startAccounts,
  startAdapter,
} from "./helpers.ts";

const version = (
  JSON.parse(readFileSync(join(repoRoot, "packages/postfix-adapter/package.json"), "utf8")) as {
    version: string;
  }
).version;

function run(args: string[], env: Record<string, string> = {}) {
  return spawnSync(adapterBin, args, {
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...env },
    encoding: "utf8",
    timeout: 30_000,
  });
}

describe("command line and configuration", () => {
  test("--help lists every variable with its default", () => {
    const result = run(["--help"]);
    assert.equal(result.status, 0);
    for (const text of [
      "SERVICE_URL (required)",
      "SERVICE_TOKEN (required)",
      "SOCKETMAP_LISTEN_ADDR=127.0.0.1:10001",
      "SASL_LISTEN_ADDR=127.0.0.1:10002",
      "POLICY_LISTEN_ADDR=127.0.0.1:10003",
      "METRICS_LISTEN_ADDR=127.0.0.1:10005",
      "REDIS_URL",
      "SERVICE_TIMEOUT=2s",
      "LOG_LEVEL=info",
    ]) {
      assert.ok(result.stdout.includes(text), text);
    }
  });

  test("--version names the adapter's and Node's versions", () => {
    const result = run(["--version"]);
    assert.equal(result.status, 0);
    assert.equal(result.stdout, `postfix-adapter ${version} (Node.js ${process.versions.node})\n`);
  });

  test("configuration errors: one line naming every variable at fault, exit 78", () => {
    const result = run([], {
      SERVICE_URL: "ftp://x",
      SOCKETMAP_LISTEN_ADDR: "10001",
      REDIS_URL: "http://localhost",
      SERVICE_TIMEOUT: "0s",
      LOG_LEVEL: "loud",
    });
    assert.equal(result.status, 78);
    assert.equal(result.stdout, "");
    const lines = result.stderr.trim().split("\n");
    assert.equal(lines.length, 1, result.stderr);
    for (const variable of [
      "SERVICE_URL",
      "SERVICE_TOKEN",
      "SOCKETMAP_LISTEN_ADDR",
      "REDIS_URL",
      "SERVICE_TIMEOUT",
      "LOG_LEVEL",
    ]) {
      assert.match(lines[0] ?? "", new RegExp(`${variable}: `), variable);
    }
    assert.equal(
      run([], { SERVICE_URL: "http://x", SERVICE_TOKEN: " " }).status,
      78,
      "a set but empty token",
    );
  });

  test("an empty variable is a missing one (the default, or required but not set), as in the service", () => {
    assertEmptyIsMissing(
      loadConfig,
      { SERVICE_URL: "http://x", SERVICE_TOKEN: "t" },
      {
        SERVICE_URL: "ftp://x",
        SERVICE_TOKEN: "t o k",
        SOCKETMAP_LISTEN_ADDR: "10001",
        SASL_LISTEN_ADDR: "[::1]",
        POLICY_LISTEN_ADDR: "host:port",
        METRICS_LISTEN_ADDR: ":99999",
        REDIS_URL: "http://localhost",
        SERVICE_TIMEOUT: "0s",
        LOG_LEVEL: "loud",
      },
    );
    assert.equal(loadConfig({ SERVICE_URL: "http://x", SERVICE_TOKEN: "t", REDIS_URL: " " }).redisUrl, null);
  });

  test("an unknown argument: exit 2 with a hint", () => {
    const result = run(["--listen", "x"]);
    assert.equal(result.status, 2);
    assert.match(result.stderr, /unknown argument: --listen/);
  });

  test("defaults and parsing", () => {
    const config = loadConfig({ SERVICE_URL: "https://accounts.example.org/base/", SERVICE_TOKEN: " t " });
    assert.equal(config.serviceUrl, "https://accounts.example.org/base");
    assert.equal(config.serviceToken, "t");
    assert.deepEqual(config.socketmapListen, { host: "127.0.0.1", port: 10001 });
    assert.deepEqual(config.saslListen, { host: "127.0.0.1", port: 10002 });
    assert.deepEqual(config.policyListen, { host: "127.0.0.1", port: 10003 });
    assert.deepEqual(config.metricsListen, { host: "127.0.0.1", port: 10005 });
    assert.equal(config.redisUrl, null);
    assert.equal(config.serviceTimeoutMs, 2000);
    assert.equal(config.logLevel, "info");
    const other = loadConfig({
      SERVICE_URL: "http://[::1]:8000",
      SERVICE_TOKEN: "t",
      SOCKETMAP_LISTEN_ADDR: "off",
      SASL_LISTEN_ADDR: "[::1]:12",
      POLICY_LISTEN_ADDR: ":13",
      METRICS_LISTEN_ADDR: "OFF",
      REDIS_URL: "redis://:secret@127.0.0.1:6379/2",
      SERVICE_TIMEOUT: "500ms",
    });
    assert.equal(other.socketmapListen, null);
    assert.deepEqual(other.saslListen, { host: "::1", port: 12 });
    assert.deepEqual(other.policyListen, { host: undefined, port: 13 });
    assert.equal(other.metricsListen, null);
    assert.equal(other.redisUrl, "redis://:secret@127.0.0.1:6379/2");
    assert.equal(other.serviceTimeoutMs, 500);
  });
});

describe("running", () => {
  let accounts: Service;
  let adapter: Adapter;

  before(async () => {
    accounts = await startAccounts();
    adapter = await startAdapter({ SERVICE_URL: accounts.url, SERVICE_TOKEN: accounts.token });
  });
  after(async () => {
    await adapter?.stop();
    await accounts?.close();
  });

  test("the listening line names every listener, the counters and the service; never the token", () => {
    const line = adapter.logs.find((l) => l.msg === "listening");
    assert.ok(line);
    assert.equal(line["counters"], "memory");
    assert.equal(line["serviceUrl"], accounts.url);
    assert.equal(line["version"], version);
    assert.equal(adapter.output().includes(accounts.token), false);
  });

  test("/health: 200 while running", async () => {
    const response = await fetch(`http://127.0.0.1:${adapter.ports.metrics}/health`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { status: "ok", redis: "off" });
    assert.equal((await fetch(`http://127.0.0.1:${adapter.ports.metrics}/nope`)).status, 404);
    assert.equal(
      (await fetch(`http://127.0.0.1:${adapter.ports.metrics}/health`, { method: "POST" })).status,
      405,
    );
  });

  test("/metrics: Prometheus text with each protocol's figures", async () => {
    const lookups = await SocketmapClient.open(adapter.ports.socketmap);
    await lookups.query("domain", "example.org");
    await lookups.query("mailbox", "nobody@example.org");
    lookups.close();
    const policy = await PolicyClient.open(adapter.ports.policy);
    await policy.ask({ sasl_username: "" });
    policy.close();
    const sasl = await SaslClient.open(adapter.ports.sasl);
    sasl.send(`AUTH\t1\tPLAIN\tservice=smtp\trip=192.0.2.50\tresp=${b64(`\0bob@example.org\0${password}`)}`);
    assert.equal(await sasl.line(), "OK\t1\tuser=bob@example.org");
    sasl.close();
    const bad = await Connection.open(adapter.ports.socketmap);
    bad.write("x:");
    await bad.closedWithin(2000);

    const response = await fetch(`http://127.0.0.1:${adapter.ports.metrics}/metrics`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    for (const line of [
      `postfix_adapter_build_info{version="${version}",node="${process.versions.node}"} 1`,
      'postfix_adapter_socketmap_lookups_total{map="domain",result="ok"} 1',
      'postfix_adapter_socketmap_lookups_total{map="mailbox",result="notfound"} 1',
      'postfix_adapter_policy_requests_total{action="dunno",reason="unauthenticated"} 1',
      'postfix_adapter_sasl_authentications_total{mechanism="PLAIN",result="success"} 1',
      'postfix_adapter_protocol_errors_total{listener="socketmap",kind="malformed"} 1',
      'postfix_adapter_service_requests_total{endpoint="auth",outcome="200"} 1',
      'postfix_adapter_socketmap_lookup_duration_seconds_count{map="domain"} 1',
      'postfix_adapter_service_request_duration_seconds_bucket{endpoint="domain",le="+Inf"} 1',
    ]) {
      assert.ok(text.split("\n").includes(line), `${line}\nin:\n${text}`);
    }
    assert.match(text, /^# TYPE postfix_adapter_socketmap_lookup_duration_seconds histogram$/m);
    assert.match(text, /^postfix_adapter_connections\{listener="sasl"\} \d+$/m);
  });

  test("a listener switched off is not opened; SIGTERM stops the adapter with exit 0", async () => {
    const partial = await startAdapter({
      SERVICE_URL: accounts.url,
      SERVICE_TOKEN: accounts.token,
      SASL_LISTEN_ADDR: "off",
      POLICY_LISTEN_ADDR: "off",
      METRICS_LISTEN_ADDR: "off",
    });
    const line = partial.logs.find((l) => l.msg === "listening");
    assert.equal(line?.["sasl"], "off");
    assert.equal(line?.["policy"], "off");
    assert.equal(line?.["metrics"], "off");
    const lookups = await SocketmapClient.open(partial.ports.socketmap);
    assert.equal(await lookups.query("domain", "example.org"), "OK 1");
    const exit = await partial.stop("SIGTERM");
    assert.deepEqual(exit, { code: 0, signal: null });
    assert.ok(partial.logs.some((l) => l.msg === "stopped"));
    assert.equal(await lookups.connection.closedWithin(1000), true);
  });

  test("a port already in use: exit 1 with a fatal line naming the listener", async () => {
    const result = spawnSync(adapterBin, [], {
      env: {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        SERVICE_URL: accounts.url,
        SERVICE_TOKEN: accounts.token,
        SOCKETMAP_LISTEN_ADDR: `127.0.0.1:${adapter.ports.socketmap}`,
        METRICS_LISTEN_ADDR: "off",
        SASL_LISTEN_ADDR: "off",
        POLICY_LISTEN_ADDR: "off",
      },
      encoding: "utf8",
      timeout: 30_000,
    });
    assert.equal(result.status, 1);
    assert.match(result.stdout, /cannot listen for socketmap on 127\.0\.0\.1:\d+/);
  });
});

describe("systemd unit", () => {
  test("contrib/systemd/postfix-adapter.service passes systemd-analyze verify", (t) => {
    const analyze = spawnSync("systemd-analyze", ["--version"], { encoding: "utf8" });
    if (analyze.error) return t.skip("systemd-analyze is not installed (Debian package systemd)");
    const dir = mkdtempSync(join(tmpdir(), "postfix-adapter-unit-"));
    try {
      // The unit names the install directory; here the checkout plays it.
      const text = readFileSync(join(repoRoot, "contrib/systemd/postfix-adapter.service"), "utf8").replaceAll(
        "/opt/mail-account-service",
        repoRoot,
      );
      const unit = join(dir, "postfix-adapter.service");
      writeFileSync(unit, text);
      const result = spawnSync("systemd-analyze", ["verify", unit], { encoding: "utf8", timeout: 60_000 });
      if (/Failed to (initialize|setup|connect)|not booted|Permission denied/i.test(result.stderr)) {
        return t.skip(`systemd-analyze verify cannot run here: ${result.stderr.trim().split("\n")[0]}`);
      }
      assert.equal(result.status, 0, result.stderr);
      assert.equal(result.stderr.replace(/^Unit .* not found\.\n?/gm, ""), "", result.stderr);
      for (const line of [
        "ExecStart=/opt/mail-account-service/bin/postfix-adapter",
        "EnvironmentFile=/etc/postfix-adapter/env",
        "RestartPreventExitStatus=78",
        "DynamicUser=yes",
        "NoNewPrivileges=yes",
        "Before=postfix.service",
      ]) {
        assert.ok(
          readFileSync(join(repoRoot, "contrib/systemd/postfix-adapter.service"), "utf8")
            .split("\n")
            .includes(line),
          line,
        );
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
