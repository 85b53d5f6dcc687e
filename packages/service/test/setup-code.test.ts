import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { readInstallationSecret } from "../src/config.ts";
import { openDatabase } from "../src/db/database.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";
import { password } from "./helpers/fixtures.ts";
import { runConsole, startServiceProcess } from "./helpers/process.ts";
import { fieldError, WebClient } from "./helpers/web-client.ts";

/** HMAC-SHA256(5e5e...5e, "setup-code"), its first 80 bits in Crockford's base32 (worked out by hand). */
const knownCode = "JSQ6-E4DA-N9RK-672P";

/** The `set-up code: ...` lines of the service's JSON log. */
const setupCodeLines = (output: string): string[] =>
  output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => String((JSON.parse(line) as { msg?: unknown }).msg ?? ""))
    .filter((msg) => msg.startsWith("set-up code:"));

describe("the set-up window: the domain made with the console, no user yet", () => {
  let dir: string;
  let databaseUrl: string;
  let drop: () => Promise<void>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "mas-setup-code-"));
    ({ url: databaseUrl, drop } = await freshDatabaseUrl(join(dir, "data.sqlite")));
    const created = runConsole(databaseUrl, ["app:domain:create", "example.org"]);
    assert.equal(created.status, 0, created.stderr);
  });
  after(async () => {
    await drop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("only the set-up code opens /init/user; the log and the console show it only while no admin exists", async () => {
    const database = await openDatabase(databaseUrl, { poolSize: 1 });
    const users = async () => (await database.db.selectFrom("users").select("email").execute()).length;
    let service = await startServiceProcess({ DATABASE_URL: databaseUrl });
    try {
      // The operator finds the code in the log and with the console; both agree.
      assert.deepEqual(setupCodeLines(service.output()), [
        `set-up code: ${knownCode} (no administrator yet: open /init in the browser and enter this code; bin/console app:setup:code prints it again)`,
      ]);
      const printed = runConsole(databaseUrl, ["app:setup:code"]);
      assert.equal(printed.status, 0, printed.stderr);
      assert.equal(printed.stdout, `${knownCode}\n`);

      const stranger = new WebClient(service.url);
      assert.equal((await stranger.get("/init")).location, "/init/user");
      const form = await stranger.get("/init/user");
      assert.equal(form.status, 200);
      assert.match(form.text, /id="field-setupCode"/);

      const without = await stranger.post("/init/user", { password, passwordRepeat: password });
      assert.equal(without.status, 400);
      assert.equal(fieldError(without.text, "setupCode"), "This field is required.");
      assert.equal(await users(), 0, "no code: nothing changes");

      for (const wrong of [
        "AAAA-BBBB-CCCC-DDDD",
        `${knownCode.slice(0, -1)}X`,
        knownCode.slice(0, 9),
        "x".repeat(5000),
      ]) {
        const refused = await stranger.post("/init/user", {
          password,
          passwordRepeat: password,
          setupCode: wrong,
        });
        assert.equal(refused.status, 403, wrong);
        assert.match(fieldError(refused.text, "setupCode") ?? "", /^This is not the set-up code\./);
        assert.ok(!refused.text.includes(knownCode), "a wrong guess never shows the code");
      }
      assert.equal(await users(), 0, "a wrong code: nothing changes");
      // The other step that writes, for a visitor who comes back to it, is closed too.
      assert.equal(
        (await stranger.post("/init", { domain: "other.org", setupCode: knownCode })).location,
        "/init/user",
      );

      // The operator, typing the code loosely (lower case, no dashes, O for 0 would do as well).
      const operator = new WebClient(service.url);
      await operator.get("/init/user");
      const made = await operator.post("/init/user", {
        password,
        passwordRepeat: password,
        setupCode: knownCode.toLowerCase().replaceAll("-", " "),
      });
      assert.equal(made.status, 303);
      assert.equal(made.location, "/init/settings");
      const admins = await database.db.selectFrom("users").select(["email", "roles"]).execute();
      assert.deepEqual(
        admins.map((u) => [u.email, JSON.parse(u.roles)]),
        [["postmaster@example.org", ["ROLE_USER", "ROLE_ADMIN"]]],
      );

      const closed = runConsole(databaseUrl, ["app:setup:code"]);
      assert.notEqual(closed.status, 0);
      assert.equal(closed.stdout, "");
      assert.match(closed.stderr, /an administrator exists/);
    } finally {
      await service.stop();
    }
    service = await startServiceProcess({ DATABASE_URL: databaseUrl });
    try {
      assert.match(service.output(), /"listening"/);
      assert.deepEqual(setupCodeLines(service.output()), [], "an administrator exists: no code in the log");
      assert.ok(!service.output().includes(knownCode));
    } finally {
      await service.stop();
      await database.close();
    }
  });
});

describe("the installation secret's file", () => {
  test("made once with mode 0600 beside the SQLite database, then reused; a bad one is refused by name", () => {
    const dir = mkdtempSync(join(tmpdir(), "mas-secret-"));
    try {
      // The console as an operator runs it: no INSTALLATION_SECRET, an SQLite database of its own.
      const env = { INSTALLATION_SECRET: "" };
      const url = `sqlite:${join(dir, "data.sqlite")}`;
      const run = (args: string[]) => runConsole(url, args, undefined, env);
      const first = run(["app:setup:code"]);
      assert.equal(first.status, 0, first.stderr);
      const file = join(dir, "installation-secret");
      assert.equal(statSync(file).mode & 0o777, 0o600);
      assert.match(first.stdout, /^[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){3}\n$/);
      assert.notEqual(first.stdout, `${knownCode}\n`, "its own random secret, not the tests'");
      assert.equal(run(["app:setup:code"]).stdout, first.stdout, "the same file, the same code");

      const secret = readInstallationSecret({ from: "file", path: file, variable: null });
      assert.equal(JSON.stringify({ secret }), '{"secret":"[installation secret]"}');

      const short = runConsole(url, ["app:setup:code"], undefined, { INSTALLATION_SECRET: "c2hvcnQ=" });
      assert.equal(short.status, 1);
      assert.match(short.stderr, /INSTALLATION_SECRET: expected 64 hex digits/);
      assert.ok(!short.stderr.includes("c2hvcnQ="), "the value is never repeated");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
