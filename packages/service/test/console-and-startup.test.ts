import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { configVariableHelp, configVariables, loadConfig } from "../src/config.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";
import { consolePath, repoRoot, runConsole, startServiceProcess } from "./helpers/process.ts";

const password = "correct horse battery staple";

describe("operator console and a service started as from the README", () => {
  let dir: string;
  let databaseUrl: string;

  let drop: () => Promise<void>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "mas-console-"));
    ({ url: databaseUrl, drop } = await freshDatabaseUrl(join(dir, "data.sqlite")));
  });
  after(async () => {
    await drop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("app:migrate creates the schema", () => {
    const result = runConsole(databaseUrl, ["app:migrate"]);
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /up to date/);
  });

  test("domain, user, alias and setting commands; errors are one line and exit non-zero", () => {
    assert.equal(runConsole(databaseUrl, ["app:domain:create", "example.org"]).status, 0);
    const dup = runConsole(databaseUrl, ["app:domain:create", "example.org"]);
    assert.equal(dup.status, 1);
    assert.equal(dup.stderr, "error: The domain example.org already exists.\n");
    const user = runConsole(databaseUrl, [
      "app:user:create",
      "--email",
      "alice@example.org",
      "--password",
      password,
      "--quota",
      "500",
    ]);
    assert.equal(user.status, 0, user.stderr);
    assert.match(user.stdout, /Created user alice@example.org/);
    assert.match(
      user.stdout,
      /Recovery token .*: [0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n/,
    );
    const stdinPassword = runConsole(
      databaseUrl,
      ["app:user:create", "--email", "bob@example.org", "--role", "ROLE_ADMIN"],
      `${password}\n`,
    );
    assert.equal(stdinPassword.status, 0, stdinPassword.stderr);
    const short = runConsole(databaseUrl, [
      "app:user:create",
      "--email",
      "carol@example.org",
      "--password",
      "short",
    ]);
    assert.equal(short.status, 1);
    assert.equal(short.stderr.trim().split("\n").length, 1);
    assert.match(short.stderr, /at least 12/);
    const badRole = runConsole(databaseUrl, [
      "app:user:create",
      "--email",
      "carol@example.org",
      "--password",
      password,
      "--role",
      "ROLE_GOD",
    ]);
    assert.equal(badRole.status, 1);
    assert.match(badRole.stderr, /unknown role/);
    const alias = runConsole(databaseUrl, [
      "app:alias:create",
      "--source",
      "info@example.org",
      "--destination",
      "alice@example.org",
      "--destination",
      "bob@example.org",
    ]);
    assert.equal(alias.status, 0, alias.stderr);
    const taken = runConsole(databaseUrl, [
      "app:alias:create",
      "--source",
      "alice@example.org",
      "--destination",
      "bob@example.org",
    ]);
    assert.equal(taken.status, 1);
    assert.match(taken.stderr, /already taken/);
    assert.equal(runConsole(databaseUrl, ["app:setting:set", "smtp_quota_limit_per_hour", "100"]).status, 0);
    const badSetting = runConsole(databaseUrl, ["app:setting:set", "mail_crypt", "7"]);
    assert.equal(badSetting.status, 1);
    assert.match(badSetting.stderr, /^error: mail_crypt: Must be one of 0, 1, 2, 3\.\n$/);
    assert.match(runConsole(databaseUrl, ["app:setting:list"]).stdout, /smtp_quota_limit_per_hour=100/);
    const unknownCommand = runConsole(databaseUrl, ["app:nothing"]);
    assert.notEqual(unknownCommand.status, 0);
  });

  test("tokens: created once in plain, listed without values, deleted", () => {
    const created = runConsole(databaseUrl, [
      "app:api-token:create",
      "--name",
      "dovecot",
      "--scopes",
      "mailbox-server,mta",
      "--scopes",
      "retention",
    ]);
    assert.equal(created.status, 0, created.stderr);
    const lines = created.stdout.split("\n").filter((l) => l.startsWith("Token: "));
    assert.equal(lines.length, 1);
    assert.match(lines[0] ?? "", /^Token: [0-9a-f]{64}$/);
    const list = runConsole(databaseUrl, ["app:api-token:list"]);
    assert.match(list.stdout, /dovecot\tmailbox-server,mta,retention\tlast used: never/);
    assert.doesNotMatch(list.stdout, /[0-9a-f]{64}/);
    const bad = runConsole(databaseUrl, ["app:api-token:create", "--name", "x", "--scopes", "everything"]);
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /unknown scope/);
    const plain = (lines[0] ?? "").slice("Token: ".length);
    assert.equal(runConsole(databaseUrl, ["app:api-token:delete", "--token", plain]).status, 0);
    assert.equal(runConsole(databaseUrl, ["app:api-token:delete", "--token", plain]).status, 1);
  });

  test("the service started on that database serves what the console created", async () => {
    const created = runConsole(databaseUrl, [
      "app:api-token:create",
      "--name",
      "dovecot",
      "--scopes",
      "mailbox-server",
    ]);
    const token = /Token: ([0-9a-f]{64})/.exec(created.stdout)?.[1] ?? "";
    const service = await startServiceProcess({ DATABASE_URL: databaseUrl, LOG_LEVEL: "info" });
    try {
      const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
      const userdb: any = await (
        await fetch(`${service.url}/api/mailbox-server/alice@example.org`, { headers })
      ).json();
      const passdb: any = await (
        await fetch(`${service.url}/api/mailbox-server/alice@example.org`, {
          method: "POST",
          headers,
          body: JSON.stringify({ password }),
        })
      ).json();
      assert.equal(passdb.body.mailCrypt, 2);
      const privatePem = Buffer.from(passdb.body.mailCryptPrivateKey, "base64").toString();
      const publicPem = execFileSync("openssl", ["pkey", "-pubout"], { input: privatePem }).toString();
      assert.equal(publicPem, Buffer.from(userdb.body.mailCryptPublicKey, "base64").toString());
      assert.match(service.output(), /listening/);
      assert.doesNotMatch(service.output(), new RegExp(token), "the token never reaches the log");
      assert.doesNotMatch(service.output(), /correct horse/, "the password never reaches the log");
    } finally {
      const code = await service.stop("SIGTERM");
      assert.equal(code, 0, `the service exited with ${code}; its output:\n${service.output()}`);
    }
  });

  test("a fresh start on an empty database says how to create the first token", async () => {
    const service = await startServiceProcess({ DATABASE_URL: `sqlite:${join(dir, "fresh", "new.sqlite")}` });
    try {
      assert.match(service.output(), /app:api-token:create/);
    } finally {
      await service.stop();
    }
  });

  test("empty variables count as unset: the console runs with every variable set but empty", () => {
    const empty = Object.fromEntries(configVariables.map((name) => [name, ""]));
    const result = spawnSync(consolePath, ["app:migrate"], {
      env: { ...process.env, ...empty, DATABASE_URL: databaseUrl },
      encoding: "utf8",
      timeout: 60000,
    });
    assert.equal(result.stderr, "");
    assert.equal(result.status, 0);
    assert.match(result.stdout, /up to date/);
  });

  test("a bad configuration stops the start with one line naming the variable", () => {
    for (const [name, value] of [
      ["LISTEN_ADDR", "nonsense"],
      ["LOG_LEVEL", "loud"],
      ["DATABASE_URL", "oracle://x"],
    ] as const) {
      const result = (() => {
        try {
          execFileSync(`${repoRoot}node_modules/.bin/node`, [`${repoRoot}packages/service/src/main.ts`], {
            env: { ...process.env, [name]: value },
            encoding: "utf8",
            stdio: "pipe",
          });
          return { status: 0, stderr: "" };
        } catch (error) {
          const e = error as { status: number; stderr: string };
          return { status: e.status, stderr: e.stderr };
        }
      })();
      assert.equal(result.status, 1, name);
      assert.equal(result.stderr.trim().split("\n").length, 1, result.stderr);
      assert.match(result.stderr, new RegExp(`^config error: ${name}:`));
    }
  });
});

describe("bin/console, bin/mailbox-janitor and npm start without the pinned Node", () => {
  // A copy of the repository's start scripts with no node_modules next to them, so they fall back to
  // the `node` on PATH. Versions that are not installed here are played by the pinned Node with
  // process.versions.node set by a preload; Node 20 is the system's own, when there is one.
  let dir: string;
  const refusal = "error: mail-account-service needs Node.js >= 22.18 (on 23.x: >= 23.6), found ";

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "mas-bin-"));
    mkdirSync(join(dir, "root", "bin", "lib"), { recursive: true });
    for (const script of ["console", "mailbox-janitor", "mail-account-service", "lib/node.sh"]) {
      copyFileSync(`${repoRoot}bin/${script}`, join(dir, "root", "bin", script));
    }
    symlinkSync(`${repoRoot}packages`, join(dir, "root", "packages"));
    copyFileSync(`${repoRoot}package.json`, join(dir, "root", "package.json"));
    writeFileSync(
      join(dir, "version.cjs"),
      'Object.defineProperty(process.versions, "node", { value: process.env.PLAYED_NODE_VERSION });\n',
    );
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const run = (script: string, nodeBinary: string, playedVersion?: string) => {
    const bin = mkdtempSync(join(dir, "path-"));
    symlinkSync(nodeBinary, join(bin, "node"));
    const env: Record<string, string> = { PATH: `${bin}:/usr/bin:/bin`, HOME: dir };
    if (playedVersion) {
      env.PLAYED_NODE_VERSION = playedVersion;
      env.NODE_OPTIONS = `--require ${join(dir, "version.cjs")}`;
    }
    return spawnSync(join(dir, "root", "bin", script), ["--help"], { env, encoding: "utf8", timeout: 60000 });
  };

  test("a Node that cannot strip types by default is refused; 22.18+, 23.6+ and 24 run", () => {
    for (const script of ["console", "mailbox-janitor", "mail-account-service"] as const) {
      for (const version of ["22.12.0", "22.17.1", "23.5.0"]) {
        const result = run(script, process.execPath, version);
        assert.equal(result.status, 1, `${script} on ${version}: ${result.stdout}`);
        assert.match(
          result.stderr,
          new RegExp(`^${refusal.replace(/[.()]/g, "\\$&")}${version}; run 'npm ci'`),
        );
        assert.equal(result.stderr.split("\n").length, 2, `one line: ${result.stderr}`);
      }
      for (const version of ["22.18.0", "23.6.0", undefined]) {
        const result = run(script, process.execPath, version);
        assert.equal(result.status, 0, `${script} on ${version ?? process.version}: ${result.stderr}`);
        assert.match(
          result.stdout,
          {
            console: /^Usage: bin\/console/,
            "mailbox-janitor": /^mailbox-janitor: /,
            "mail-account-service": /^Usage: mail-account-service/,
          }[script],
        );
      }
      if (
        existsSync("/usr/bin/node") &&
        !/^v2[2-9]/.test(execFileSync("/usr/bin/node", ["--version"], { encoding: "utf8" }))
      ) {
        const old = run(script, "/usr/bin/node");
        assert.equal(old.status, 1, `${script} on the system's old Node`);
        assert.match(old.stderr, new RegExp(`^${refusal.replace(/[.()]/g, "\\$&")}`));
        assert.equal(old.stderr.split("\n").length, 2, `one line: ${old.stderr}`);
      }
    }
  });

  test("npm start on a Node too old (the system's own Node 20, when there is one) says so in one line", (t) => {
    const npm = "/usr/bin/npm";
    if (!existsSync(npm) || !existsSync("/usr/bin/node")) return t.skip("no system npm and node here");
    if (/^v2[2-9]/.test(execFileSync("/usr/bin/node", ["--version"], { encoding: "utf8" })))
      return t.skip("the system's Node is not too old");
    const bin = mkdtempSync(join(dir, "path-"));
    symlinkSync("/usr/bin/node", join(bin, "node"));
    const result = spawnSync(npm, ["start", "--silent"], {
      cwd: join(dir, "root"),
      env: { PATH: `${bin}:/usr/bin:/bin`, HOME: dir },
      encoding: "utf8",
      timeout: 60000,
    });
    assert.equal(result.status, 1, result.stdout);
    assert.match(result.stderr, new RegExp(`^${refusal.replace(/[.()]/g, "\\$&")}`));
    assert.doesNotMatch(result.stderr, /\n\s+at /, "no stack trace");
    assert.equal(result.stderr.trim().split("\n").length, 1, result.stderr);
  });

  test("package.json engines state the same minimum", async () => {
    const { readFileSync } = await import("node:fs");
    const pkg = JSON.parse(readFileSync(`${repoRoot}package.json`, "utf8"));
    const lock = JSON.parse(readFileSync(`${repoRoot}package-lock.json`, "utf8"));
    assert.equal(pkg.engines.node, "^22.18.0 || >=23.6.0");
    assert.equal(lock.packages[""].engines.node, pkg.engines.node);
  });
});

describe("a release: version, help, systemd units, license", () => {
  const node = `${repoRoot}node_modules/.bin/node`;
  const main = `${repoRoot}packages/service/src/main.ts`;
  const { version } = JSON.parse(readFileSync(`${repoRoot}packages/service/package.json`, "utf8"));

  test("every package.json has the same version and the SPDX license; the changelog starts with it", () => {
    for (const file of ["package.json", "packages/service/package.json", "packages/janitor/package.json"]) {
      const pkg = JSON.parse(readFileSync(`${repoRoot}${file}`, "utf8"));
      assert.equal(pkg.version, version, file);
      assert.equal(pkg.license, "AGPL-3.0-or-later", file);
    }
    const pkg = JSON.parse(readFileSync(`${repoRoot}package.json`, "utf8"));
    assert.ok(pkg.dependencies?.node, "the pinned Node is a runtime dependency (npm ci --omit=dev)");
    assert.equal(pkg.devDependencies?.node, undefined);
    const changelog = readFileSync(`${repoRoot}CHANGELOG.md`, "utf8");
    assert.match(changelog, new RegExp(`^## \\[${version.replace(/\./g, "\\.")}\\]`, "m"));
    assert.match(readFileSync(`${repoRoot}LICENSE`, "utf8"), /^GNU AFFERO GENERAL PUBLIC LICENSE\nVersion 3/);
  });

  test("--version and --help of the service; other arguments are refused", () => {
    const run = (args: string[]) => spawnSync(node, [main, ...args], { encoding: "utf8", timeout: 30000 });
    const v = run(["--version"]);
    assert.equal(v.status, 0);
    assert.equal(v.stdout, `mail-account-service ${version} (Node.js ${process.versions.node})\n`);
    const help = run(["--help"]);
    assert.equal(help.status, 0);
    for (const name of configVariables) assert.match(help.stdout, new RegExp(`^  ${name}=`, "m"), name);
    assert.match(help.stdout, /^ {2}LISTEN_ADDR=127\.0\.0\.1:8000 /m);
    const bad = run(["--port", "80"]);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /^error: unknown argument/);
    assert.equal(bad.stderr.trim().split("\n").length, 1);
  });

  test("the defaults --help shows are the ones loadConfig applies", () => {
    const shown = Object.fromEntries(
      Object.entries(configVariableHelp)
        .filter(([, { default: value }]) => value !== "")
        .map(([name, { default: value }]) => [name, value]),
    );
    assert.deepEqual(loadConfig(shown), loadConfig({}));
    assert.deepEqual(Object.keys(configVariableHelp).sort(), [...configVariables].sort());
  });

  test("bin/console and bin/mailbox-janitor --version", () => {
    for (const script of ["console", "mailbox-janitor"]) {
      const result = spawnSync(`${repoRoot}bin/${script}`, ["--version"], {
        encoding: "utf8",
        timeout: 30000,
      });
      assert.equal(result.status, 0, result.stderr);
      assert.match(
        result.stdout,
        new RegExp(`^(mail-account-service|mailbox-janitor) ${version.replace(/\./g, "\\.")} `),
      );
    }
  });

  test("the version is in the listening log line and in /metrics as build info", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mas-version-"));
    const service = await startServiceProcess({
      DATABASE_URL: `sqlite:${join(dir, "v.sqlite")}`,
      METRICS_TOKEN: "metrics-token-for-the-test",
    });
    try {
      const listening = service
        .output()
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line))
        .find((entry) => entry.msg === "listening");
      assert.equal(listening?.version, version);
      const metrics = await (
        await fetch(`${service.url}/metrics`, {
          headers: { authorization: "Bearer metrics-token-for-the-test" },
        })
      ).text();
      assert.match(
        metrics,
        new RegExp(
          `^mail_account_service_build_info\\{version="${version.replace(/\./g, "\\.")}",node="${process.versions.node}"\\} 1$`,
          "m",
        ),
      );
    } finally {
      await service.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("both systemd units pass systemd-analyze verify", (t) => {
    const analyze = spawnSync("systemd-analyze", ["--version"], { encoding: "utf8" });
    if (analyze.error) return t.skip("systemd-analyze is not installed (Debian package systemd)");
    const dir = mkdtempSync(join(tmpdir(), "mas-units-"));
    try {
      for (const unit of ["mail-account-service.service", "mailbox-janitor.service"]) {
        // The units name the install directory; here the checkout plays it, so that verify finds
        // the executables they start.
        const text = readFileSync(`${repoRoot}contrib/systemd/${unit}`, "utf8").replaceAll(
          "/opt/mail-account-service",
          repoRoot.replace(/\/$/, ""),
        );
        writeFileSync(join(dir, unit), text);
        const result = spawnSync("systemd-analyze", ["verify", join(dir, unit)], {
          encoding: "utf8",
          timeout: 60000,
        });
        if (/Failed to (initialize|setup|connect)|not booted|Permission denied/i.test(result.stderr)) {
          return t.skip(`systemd-analyze verify cannot run here: ${result.stderr.trim().split("\n")[0]}`);
        }
        assert.equal(result.status, 0, `${unit}: ${result.stderr}`);
        // verify prints problems but may still exit 0 for some of them.
        assert.equal(result.stderr.replace(/^Unit .* not found\.\n?/gm, ""), "", `${unit}: ${result.stderr}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the service unit: its own user, data outside the checkout, hardening, restart on failure", () => {
    const unit = readFileSync(`${repoRoot}contrib/systemd/mail-account-service.service`, "utf8");
    for (const line of [
      "DynamicUser=yes",
      "StateDirectory=mail-account-service",
      "Environment=DATABASE_URL=sqlite:/var/lib/mail-account-service/data.sqlite",
      "EnvironmentFile=-/etc/mail-account-service/env",
      "ExecStart=/opt/mail-account-service/node_modules/.bin/node /opt/mail-account-service/packages/service/src/main.ts",
      "Restart=on-failure",
      "NoNewPrivileges=yes",
      "ProtectSystem=strict",
      "ProtectHome=yes",
      "PrivateTmp=yes",
      "ReadWritePaths=/var/lib/mail-account-service",
      "CapabilityBoundingSet=",
    ]) {
      assert.ok(unit.split("\n").includes(line), line);
    }
    assert.equal(unit.match(/^ReadWritePaths=/gm)?.length, 1, "only the data directory is writable");
  });
});
