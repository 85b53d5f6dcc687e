import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { confirmedPassword } from "../src/cli/context.ts";
import { openDatabase } from "../src/db/database.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";
import { consolePath, runConsole } from "./helpers/process.ts";

const password = "correct horse battery staple";
const day = 86400;

/**
 * Runs bin/console on a pseudo-terminal (util-linux `script`), answering each prompt when it appears,
 * as an operator typing would. Returns everything the terminal showed.
 */
function onTerminal(
  databaseUrl: string,
  args: string[],
  answers: string[],
): Promise<{ status: number | null; screen: string }> {
  const command = [consolePath, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
  const child = spawn("script", ["-qec", command, "/dev/null"], {
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: "silent" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let screen = "";
  let answered = 0;
  const onOutput = (chunk: Buffer) => {
    screen += chunk.toString("utf8");
    // A prompt ends in ": " and is the last thing shown; answer it once.
    const prompts = screen.match(/[^\n]*: $/) ? screen.split(/: /).length - 1 : 0;
    if (/: $/.test(screen) && answered < answers.length && prompts > answered) {
      child.stdin.write(`${answers[answered++]}\r`);
    }
  };
  child.stdout.on("data", onOutput);
  child.stderr.on("data", onOutput);
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 60000);
    child.on("exit", (status) => {
      clearTimeout(timer);
      resolve({ status, screen });
    });
  });
}

const hasScript = (() => {
  try {
    return spawn("script", ["--version"]).pid !== undefined;
  } catch {
    return false;
  }
})();

describe("console: lists, option names, prompts, dry runs", () => {
  let dir: string;
  let databaseUrl: string;
  let drop: () => Promise<void>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "mas-console-commands-"));
    ({ url: databaseUrl, drop } = await freshDatabaseUrl(join(dir, "data.sqlite")));
    const ok = (args: string[], input?: string) => {
      const result = runConsole(databaseUrl, args, input);
      assert.equal(result.status, 0, `${args.join(" ")}: ${result.stderr}`);
      return result;
    };
    ok(["app:domain:create", "example.org"]);
    ok(["app:domain:create", "-d", "example.net"]);
    ok(["app:user:create", "-u", "alice@example.org", "--password", password, "--role", "ROLE_ADMIN"]);
    ok(["app:user:create", "--email", "bob@example.org", "--password", password]);
    ok(["app:user:create", "--user", "carol@example.net"], `${password}\n`);
    ok(["app:alias:create", "-a", "info@example.org", "--destination", "alice@example.org"]);
    ok(["app:alias:create", "--source", "sales@example.net", "--owner", "carol@example.net"]);
    ok(["app:alias:create", "--alias", "old@example.org", "-u", "bob@example.org"]);
    ok(["app:alias:delete", "-a", "old@example.org"]);
  });
  after(async () => {
    await drop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("--version names the service's version", () => {
    const result = runConsole(databaseUrl, ["--version"]);
    assert.equal(result.status, 0);
    assert.match(result.stdout, /^mail-account-service 0\.2\.0 \(Node\.js \d+\.\d+\.\d+\)\n$/);
  });

  test("a reader that closes the pipe early (| head) ends the command quietly, without a stack trace", async () => {
    const child = spawn(consolePath, ["app:users:list", "--json"], {
      env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: "silent" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    // The read end is closed before the command writes anything.
    child.stdout.destroy();
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const status = await new Promise<number | null>((resolve) => child.on("close", resolve));
    assert.equal(stderr, "");
    assert.equal(status, 0);
  });

  test("app:users:list: a table, --domain, --search, --status, --json", () => {
    const table = runConsole(databaseUrl, ["app:users:list"]);
    assert.equal(table.status, 0, table.stderr);
    const lines = table.stdout.trimEnd().split("\n");
    assert.match(lines[0] ?? "", /^EMAIL\s+STATUS\s+ROLES\s+QUOTA\s+MAILCRYPT\s+LAST LOGIN$/);
    assert.deepEqual(
      lines.slice(1).map((l) => l.split(/\s+/)[0]),
      ["alice@example.org", "bob@example.org", "carol@example.net"].sort(),
    );
    assert.match(table.stdout, /alice@example.org\s+active\s+ROLE_ADMIN/);
    const json = runConsole(databaseUrl, ["app:users:list", "--domain", "example.org", "--json"]);
    const users = JSON.parse(json.stdout) as { email: string; deleted: boolean }[];
    assert.deepEqual(
      users.map((u) => u.email),
      ["alice@example.org", "bob@example.org"],
    );
    for (const user of users) {
      assert.deepEqual(
        Object.keys(user).filter((key) => /^password$|secret|hash|privateKey/i.test(key)),
        [],
        "no credential in the list",
      );
    }
    const search = runConsole(databaseUrl, ["app:users:list", "--search", "CAR", "--json"]);
    assert.deepEqual(
      (JSON.parse(search.stdout) as { email: string }[]).map((u) => u.email),
      ["carol@example.net"],
    );
    const none = runConsole(databaseUrl, ["app:users:list", "--search", "nobody"]);
    assert.equal(none.stdout, "No users.\n");
    const unknownDomain = runConsole(databaseUrl, ["app:users:list", "-d", "unknown.example"]);
    assert.equal(unknownDomain.status, 1);
    assert.match(unknownDomain.stderr, /^error: Domain not found\.\n$/);
    const badStatus = runConsole(databaseUrl, ["app:users:list", "--status", "sleeping"]);
    assert.equal(badStatus.status, 1);
    assert.match(badStatus.stderr, /--status/);
  });

  test("app:aliases:list: a table, --domain, --user, --search, deleted ones only on request, --json", () => {
    const table = runConsole(databaseUrl, ["app:aliases:list"]);
    assert.equal(table.status, 0, table.stderr);
    assert.match(table.stdout, /^ALIAS\s+DESTINATIONS\s+OWNER\s+STATUS\n/);
    assert.match(table.stdout, /info@example.org\s+alice@example.org\s+-\s+active/);
    assert.match(table.stdout, /sales@example.net\s+carol@example.net\s+carol@example.net\s+active/);
    assert.doesNotMatch(table.stdout, /old@example.org/);
    const sources = (args: string[]) =>
      (
        JSON.parse(runConsole(databaseUrl, ["app:aliases:list", "--json", ...args]).stdout) as {
          source: string;
        }[]
      )
        .map((a) => a.source)
        .sort();
    assert.deepEqual(sources(["-d", "example.net"]), ["sales@example.net"]);
    assert.deepEqual(sources(["--user", "carol@example.net"]), ["sales@example.net"]);
    assert.deepEqual(sources(["--search", "inf"]), ["info@example.org"]);
    assert.deepEqual(sources(["--status", "deleted"]), ["old@example.org"]);
    assert.deepEqual(sources(["--status", "all"]), [
      "info@example.org",
      "old@example.org",
      "sales@example.net",
    ]);
  });

  test("app:domains:list: a table, --search, --json", () => {
    const table = runConsole(databaseUrl, ["app:domains:list"]);
    assert.equal(table.status, 0, table.stderr);
    assert.match(
      table.stdout,
      /^DOMAIN\s+CREATED\nexample\.net\s+\d{4}-\d\d-\d\d \d\d:\d\d\nexample\.org\s+/,
    );
    const json = JSON.parse(
      runConsole(databaseUrl, ["app:domains:list", "--search", ".net", "--json"]).stdout,
    );
    assert.deepEqual(
      json.map((d: { name: string }) => d.name),
      ["example.net"],
    );
  });

  test("the help shows the consistent option names; the former spellings still work (see before)", () => {
    for (const [command, flags] of [
      ["app:user:create", ["-u, --user <email>"]],
      ["app:alias:create", ["-a, --alias <address>", "-u, --user <email>"]],
      ["app:alias:delete", ["-a, --alias <address>", "-u, --user <email>"]],
      ["app:domain:delete", ["-d, --domain <name>"]],
      ["app:users:list", ["-d, --domain <name>", "--search <text>", "--json"]],
      ["app:aliases:list", ["-d, --domain <name>", "-u, --user <email>", "--search <text>", "--json"]],
      ["app:domains:list", ["--search <text>", "--json"]],
      ["app:webhook:create", ["-d, --domain <name>"]],
      ["app:api-token:create", ["-t, --name <text>", "-s, --scopes <scopes>"]],
    ] as const) {
      const help = runConsole(databaseUrl, [command, "--help"]).stdout;
      for (const flag of flags) assert.ok(help.includes(flag), `${command} --help shows ${flag}:\n${help}`);
      assert.doesNotMatch(help, /--email|--source|--owner/, `${command}: former spellings stay hidden`);
    }
    const missing = runConsole(databaseUrl, ["app:user:create", "--password", password]);
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /-u, --user/);
  });

  test("app:jobs:run remove-inactive-users --dry-run lists who would go and who is exempt, writing nothing", async () => {
    for (const [email, roles] of [
      ["idle@example.org", []],
      ["keeper@example.org", ["ROLE_PERMANENT"]],
    ] as const) {
      const args = ["app:user:create", "-u", email, "--password", password];
      for (const role of roles) args.push("--role", role);
      assert.equal(runConsole(databaseUrl, args).status, 0);
    }
    const long = Math.floor(Date.now() / 1000) - 1000 * day;
    const database = await openDatabase(databaseUrl, { poolSize: 1 });
    try {
      await database.db
        .updateTable("users")
        .set({ created_at: long, last_login_time: long })
        .where("email", "in", ["idle@example.org", "keeper@example.org"])
        .execute();
    } finally {
      await database.close();
    }
    const dry = runConsole(databaseUrl, ["app:jobs:run", "remove-inactive-users", "--dry-run"]);
    assert.equal(dry.status, 0, dry.stderr);
    assert.equal(
      dry.stdout,
      "would remove idle@example.org\nexempt keeper@example.org (role keeps it)\n" +
        "remove-inactive-users: would delete 1, keep 1 exempt (dry run, nothing written)\n",
    );
    const active = runConsole(databaseUrl, ["app:users:list", "--search", "idle", "--json"]);
    assert.equal(JSON.parse(active.stdout)[0]?.deleted, false, "the dry run deleted nobody");
    const otherJob = runConsole(databaseUrl, ["app:jobs:run", "prune-webhook-deliveries", "--dry-run"]);
    assert.equal(otherJob.status, 1);
    assert.match(otherJob.stderr, /no dry run/);
    const real = runConsole(databaseUrl, ["app:jobs:run", "remove-inactive-users"]);
    assert.match(real.stdout, /deleted 1, kept 1 exempt/);
  });

  test("a new password typed twice must match", () => {
    assert.equal(confirmedPassword(password, password), password);
    assert.throws(() => confirmedPassword(password, `${password} `), /do not match/);
  });

  test("on a terminal a new password is not echoed and is asked twice; a mismatch changes nothing", {
    skip: hasScript ? false : "util-linux `script` (a pseudo-terminal) is not installed",
  }, async () => {
    const typed = "typed on a terminal 1";
    const created = await onTerminal(
      databaseUrl,
      ["app:user:create", "-u", "tty@example.org"],
      [typed, typed],
    );
    assert.equal(created.status, 0, created.screen);
    assert.match(created.screen, /Password: \r?\nPassword \(again\): \r?\nCreated user tty@example.org/);
    assert.equal(created.screen.includes(typed), false, "the password is never shown");
    const mismatch = await onTerminal(
      databaseUrl,
      ["app:users:reset", "-u", "tty@example.org"],
      ["a new password 12", "a new password 13"],
    );
    assert.equal(mismatch.status, 1, mismatch.screen);
    assert.match(mismatch.screen, /error: the two passwords do not match/);
    assert.equal(mismatch.screen.includes("a new password"), false);
    // The old password still opens the MailCrypt key: the reset did not happen.
    const key = runConsole(databaseUrl, ["app:users:mailcrypt", "-u", "tty@example.org", typed]);
    assert.equal(key.status, 0, key.stderr);
    const changed = await onTerminal(
      databaseUrl,
      ["app:user:password", "-u", "tty@example.org"],
      [typed, "changed on a terminal", "changed on a terminal"],
    );
    assert.equal(changed.status, 0, changed.screen);
    assert.match(changed.screen, /Current password: \r?\nNew password: \r?\nNew password \(again\): /);
    assert.equal(changed.screen.includes("changed on a terminal"), false);
  });

  test("piped passwords still work: one line for a new one, old and new for a change", () => {
    const reset = runConsole(databaseUrl, ["app:users:reset", "-u", "bob@example.org"], `${password} 2\n`);
    assert.equal(reset.status, 0, reset.stderr);
    const change = runConsole(
      databaseUrl,
      ["app:user:password", "-u", "bob@example.org"],
      `${password} 2\n${password} 3\n`,
    );
    assert.equal(change.status, 0, change.stderr);
    assert.equal(change.stdout, "Password changed.\n");
  });
});
