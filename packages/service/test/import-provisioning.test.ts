import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { CryptoPool } from "../src/credentials/crypto-pool.ts";
import { openSecretBox } from "../src/credentials/mailcrypt.ts";
import { openDatabase } from "../src/db/database.ts";
import { parseCsv } from "../src/import/csv.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";
import { runConsole } from "./helpers/process.ts";
import { startService, type TestService } from "./helpers/service.ts";

/**
 * Bulk provisioning: app:users:import --csv, app:users:export --csv and POST /api/admin/users/import.
 * The whole list is checked first and every bad line reported at once; the passwords made and the
 * recovery tokens go to the output file (or the answer), and they work.
 */

const password = "correct horse battery staple";

test("CSV: quoted fields, doubled quotes, line breaks inside quotes, CRLF, a byte order mark", () => {
  const records = parseCsv(
    '\uFEFFemail,aliases\r\n"a@example.org","x@example.org\ny@example.org"\r\n\r\nb@example.org,"say ""hi"""\n',
  );
  assert.deepEqual(records, [
    { line: 1, fields: ["email", "aliases"] },
    { line: 2, fields: ["a@example.org", "x@example.org\ny@example.org"] },
    { line: 5, fields: ["b@example.org", 'say "hi"'] },
  ]);
  assert.throws(() => parseCsv('email\n"open'), /line 2: a quoted field is not closed/);
});

describe("app:users:import and app:users:export", () => {
  let dir: string;
  let url: string;
  let drop: () => Promise<void>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "mas-bulk-"));
    ({ url, drop } = await freshDatabaseUrl(join(dir, "data.sqlite")));
    assert.equal(runConsole(url, ["app:domain:create", "example.org"]).status, 0);
    assert.equal(
      runConsole(url, ["app:user:create", "-u", "taken@example.org", "--password", password]).status,
      0,
    );
  });
  after(async () => {
    await drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  test("a list with bad lines: every problem of every line is reported, and nothing is created", () => {
    const list = file(
      "bad.csv",
      [
        "email,password,quota,mailCrypt,aliases",
        "good@example.org,,100,true,good-alias@example.org",
        "not an address,,,,",
        "far@elsewhere.example,short,-3,maybe,",
        "taken@example.org,,,,taken-too@example.org",
        "twice@example.org,,,,good-alias@example.org",
        "twice@example.org,,,,",
        "",
      ].join("\r\n"),
    );
    const run = runConsole(url, ["app:users:import", "--csv", list, "--output", join(dir, "never.csv")]);
    assert.equal(run.status, 1);
    const lines = run.stderr.trim().split("\n");
    for (const expected of [
      "line 3 (not an address): email: not a valid e-mail address:",
      "line 4 (far@elsewhere.example): email: domain elsewhere.example is not managed here",
      "line 4 (far@elsewhere.example): password: must be at least 12 characters",
      "line 4 (far@elsewhere.example): quota: must be a whole number of MiB, 0 or more",
      "line 4 (far@elsewhere.example): mailCrypt: must be true or false",
      "line 5 (taken@example.org): address taken@example.org is already taken",
      "line 6 (twice@example.org): good-alias@example.org is also on line 2",
      "line 7 (twice@example.org): twice@example.org is also on line 6",
      "error: 5 of 6 lines cannot be imported; nothing was created",
    ])
      assert.ok(
        lines.some((l) => l.startsWith(expected)),
        `missing "${expected}" in:\n${run.stderr}`,
      );
    assert.throws(() => statSync(join(dir, "never.csv")));
    const users = JSON.parse(runConsole(url, ["app:users:list", "--json"]).stdout);
    assert.deepEqual(
      users.map((u: { email: string }) => u.email),
      ["taken@example.org"],
    );
    const header = runConsole(url, [
      "app:users:import",
      "--csv",
      file("header.csv", "mail,password\r\nx@example.org,\r\n"),
      "--dry-run",
    ]);
    assert.equal(header.status, 1);
    assert.match(header.stderr, /line 1: unknown columns "mail"/);
  });

  test("a good list: users and aliases created, the passwords made and the recovery tokens in the output file", async () => {
    const list = file(
      "good.csv",
      [
        "email,password,quota,mailCrypt,aliases",
        `ann@example.org,${password},1024,,ann.smith@example.org`,
        "ben@example.org,,,true,ben.b@example.org ben-c@example.org",
        "cas@example.org,,0,false,",
      ].join("\n"),
    );
    const dry = runConsole(url, ["app:users:import", "--csv", list, "--dry-run"]);
    assert.equal(dry.status, 0, dry.stderr);
    assert.match(dry.stdout, /^3 users can be imported \(dry run, nothing written\)\.$/m);
    assert.equal(runConsole(url, ["app:users:import", "--csv", list]).status, 1, "--output is required");

    const output = join(dir, "credentials.csv");
    const run = runConsole(url, ["app:users:import", "--csv", list, "--output", output]);
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /^Created 3 users and 3 aliases; credentials in /m);
    assert.equal(statSync(output).mode & 0o777, 0o600);
    const [header, ...rows] = parseCsv(readFileSync(output, "utf8"));
    assert.deepEqual(header?.fields, ["email", "password", "recoveryToken"]);
    const byEmail = new Map(rows.map((r) => [r.fields[0], r.fields]));
    assert.deepEqual([...byEmail.keys()].sort(), ["ann@example.org", "ben@example.org", "cas@example.org"]);
    assert.equal(byEmail.get("ann@example.org")?.[1], "", "a password given is not written back");
    const benPassword = byEmail.get("ben@example.org")?.[1] ?? "";
    assert.match(benPassword, /^[A-Za-z0-9]{20}$/);
    assert.match(byEmail.get("ben@example.org")?.[2] ?? "", /^[0-9a-f-]{36}$/);
    assert.equal(byEmail.get("cas@example.org")?.[2], "", "no MailCrypt, no recovery token");

    // The password made works (a sign-in that opens the MailCrypt key), and the token opens the recovery box.
    const signIn = runConsole(url, ["app:users:mailcrypt", "-u", "ben@example.org", benPassword]);
    assert.equal(signIn.status, 0, signIn.stderr);
    const privateKey = signIn.stdout.split("\n")[0] ?? "";
    const handle = await openDatabase(url, { poolSize: 1 });
    try {
      const ben = await handle.db
        .selectFrom("users")
        .selectAll()
        .where("email", "=", "ben@example.org")
        .executeTakeFirstOrThrow();
      assert.equal(
        await openSecretBox(
          ben.recovery_secret_box ?? "",
          byEmail.get("ben@example.org")?.[2] ?? "",
          new CryptoPool(1),
        ),
        privateKey,
      );
      const ann = await handle.db
        .selectFrom("users")
        .selectAll()
        .where("email", "=", "ann@example.org")
        .executeTakeFirstOrThrow();
      assert.equal(ann.quota, 1024);
    } finally {
      await handle.close();
    }
    const aliases = JSON.parse(runConsole(url, ["app:aliases:list", "--json"]).stdout) as {
      source: string;
      owner: string;
      destinations: string[];
    }[];
    assert.deepEqual(aliases.map((a) => [a.source, a.owner, a.destinations]).sort(), [
      ["ann.smith@example.org", "ann@example.org", ["ann@example.org"]],
      ["ben-c@example.org", "ben@example.org", ["ben@example.org"]],
      ["ben.b@example.org", "ben@example.org", ["ben@example.org"]],
    ]);
    // The output file is never overwritten.
    const again = runConsole(url, [
      "app:users:import",
      "--csv",
      file("one.csv", "email\ndan@example.org\n"),
      "--output",
      output,
    ]);
    assert.equal(again.status, 1);
    assert.match(again.stderr, /--output: cannot create .*EEXIST/);
    assert.equal(
      JSON.parse(runConsole(url, ["app:users:list", "--search", "dan@", "--json"]).stdout).length,
      0,
    );
  });

  test("app:users:export --csv: the active users as a list app:users:import takes, without secrets", () => {
    const run = runConsole(url, ["app:users:export", "--csv"]);
    assert.equal(run.status, 0, run.stderr);
    const [header, ...rows] = parseCsv(run.stdout);
    assert.deepEqual(header?.fields, ["email", "quota", "mailCrypt", "aliases"]);
    const ben = rows.find((r) => r.fields[0] === "ben@example.org");
    assert.deepEqual(ben?.fields, ["ben@example.org", "", "true", "ben.b@example.org ben-c@example.org"]);
    assert.deepEqual(rows.find((r) => r.fields[0] === "ann@example.org")?.fields.slice(0, 2), [
      "ann@example.org",
      "1024",
    ]);
    assert.ok(!/argon2|scrypt|BEGIN|-----/.test(run.stdout));
    // Into another database it goes as it came out (new passwords, since none is exported).
    const unknown = runConsole(url, ["app:users:export", "--csv", "-d", "nowhere.example"]);
    assert.equal(unknown.status, 1);
    assert.match(unknown.stderr, /Domain not found/);
  });
});

describe("POST /api/admin/users/import", () => {
  let service: TestService;
  let admin: string;

  before(async () => {
    service = await startService();
    admin = await service.token("admin");
    await service.services.domains.create("example.org");
    await service.services.users.create({ email: "taken@example.org", password });
  });
  after(() => service.close());

  test("a CSV list with bad lines: 422 with every problem of every line, nothing created", async () => {
    const csv = "email,password,quota\r\nok@example.org,,\r\nbad address,short,x\r\ntaken@example.org,,\r\n";
    const res = await service.request("POST", "/api/admin/users/import", {
      token: admin,
      body: csv,
      headers: { "content-type": "text/csv" },
    });
    assert.equal(res.status, 422, res.text);
    assert.equal(res.body.message, "2 of 3 lines cannot be imported; nothing was created");
    assert.deepEqual(
      res.body.lines.map((l: { line: number; problems: string[] }) => [l.line, l.problems.length]),
      [
        [3, 3],
        [4, 1],
      ],
    );
    assert.equal(
      (await service.request("GET", "/api/admin/users/ok@example.org", { token: admin })).status,
      404,
    );
  });

  test("a CSV list of more users than a request takes, or one that cannot be read: 422 naming why, nothing created", async () => {
    const csv = (text: string) =>
      service.request("POST", "/api/admin/users/import", {
        token: admin,
        body: text,
        headers: { "content-type": "text/csv" },
      });
    const many = await csv(
      `email\r\n${Array.from({ length: 1001 }, (_, i) => `many${i}@example.org\r\n`).join("")}`,
    );
    assert.equal(many.status, 422, many.text);
    assert.equal(
      many.text,
      '{"message":"users: at most 1000 per request; use bin/console app:users:import for more"}',
    );
    const unclosed = await csv('email\r\nok@example.org\r\n"open@example.org\r\n');
    assert.equal(unclosed.status, 422, unclosed.text);
    assert.equal(
      unclosed.text,
      '{"message":"1 of 0 lines cannot be imported; nothing was created","lines":[{"line":3,"email":"","problems":["line 3: a quoted field is not closed"]}]}',
    );
    const header = await csv("mail\r\nok@example.org\r\n");
    assert.equal(header.status, 422, header.text);
    assert.match(header.body.lines[0].problems[0], /^unknown columns "mail"/);
    for (const address of ["many0@example.org", "ok@example.org"])
      assert.equal(
        (await service.request("GET", `/api/admin/users/${address}`, { token: admin })).status,
        404,
      );
  });

  test("a JSON list: the users, the passwords made and the recovery tokens, once", async () => {
    const res = await service.request("POST", "/api/admin/users/import", {
      token: admin,
      json: {
        users: [
          { email: "json1@example.org", aliases: ["json-alias@example.org"] },
          { email: "json2@example.org", password, mailCrypt: false, quota: 10 },
        ],
      },
    });
    assert.equal(res.status, 200, res.text);
    const [first, second] = res.body.users;
    assert.equal(first.email, "json1@example.org");
    assert.match(first.password, /^[A-Za-z0-9]{20}$/);
    assert.match(first.recoveryToken, /^[0-9a-f-]{36}$/);
    assert.deepEqual(first.aliases, ["json-alias@example.org"]);
    assert.deepEqual([second.password, second.recoveryToken], [null, null]);
    assert.deepEqual(res.body.failed, []);
    const mailbox = await service.token("mailbox-server");
    const passdb = await service.request("POST", "/api/mailbox-server/json1@example.org", {
      token: mailbox,
      json: { password: first.password },
    });
    assert.equal(passdb.status, 200, passdb.text);
    const wrongType = await service.request("POST", "/api/admin/users/import", {
      token: admin,
      json: { users: [{ email: "x@example.org", quota: "lots" }] },
    });
    assert.equal(wrongType.status, 422);
    assert.match(wrongType.body.message, /^users\[0\]\.quota: must be/);
  });
});
