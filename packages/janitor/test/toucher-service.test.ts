/**
 * The toucher end to end against the real account service: bin/console and the service process
 * from this repository, the janitor daemon as it runs on a mail server.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { after, test } from "node:test";
import { cleanup, repoRoot, startJanitor, tempDir, waitFor } from "./helpers.ts";

const password = "correct horse battery staple";
const dirs: string[] = [];
let service: ChildProcess | null = null;
after(async () => {
  service?.kill("SIGTERM");
  await cleanup(...dirs);
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
    server.on("error", reject);
  });
}

test("a user whose Sieve script forwards everything is touched and leaves the retention list", async () => {
  const dir = await tempDir("janitor-e2e-");
  dirs.push(dir);
  const databaseUrl = `sqlite:${join(dir, "service.sqlite")}`;
  const console = (...args: string[]) => {
    const result = spawnSync(join(repoRoot, "bin", "console"), args, {
      env: { ...process.env, DATABASE_URL: databaseUrl },
      encoding: "utf8",
    });
    assert.equal(result.status, 0, `${args.join(" ")}: ${result.stderr}`);
    return result.stdout;
  };
  console("app:domain:create", "example.org");
  for (const local of ["forwarder", "keeper", "nosieve"]) {
    console("app:user:create", "--email", `${local}@example.org`, "--password", password);
  }
  const token = (scopes: string) =>
    /Token: ([0-9a-f]{64})/.exec(
      console("app:api-token:create", "--name", scopes, "--scopes", scopes),
    )?.[1] ?? "";
  const retentionToken = token("retention");
  const adminToken = token("admin");

  const port = await freePort();
  service = spawn(
    join(repoRoot, "node_modules", ".bin", "node"),
    [join(repoRoot, "packages", "service", "src", "main.ts")],
    {
      env: { ...process.env, DATABASE_URL: databaseUrl, LISTEN_ADDR: `127.0.0.1:${port}`, LOG_LEVEL: "warn" },
      stdio: "ignore",
    },
  );
  const serviceUrl = `http://127.0.0.1:${port}`;
  await waitFor(
    "the account service",
    async () => (await fetch(`${serviceUrl}/health`).catch(() => null))?.ok === true,
    30_000,
  );

  // Three years without a sign-in: all three are on the retention list.
  const old = Math.floor(Date.now() / 1000) - 3 * 365 * 86400;
  for (const local of ["forwarder", "keeper", "nosieve"]) {
    const res = await fetch(`${serviceUrl}/api/admin/users/${local}@example.org`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ lastLoginTime: old }),
    });
    assert.equal(res.status, 200);
  }
  const inactive = async (): Promise<string[]> =>
    (
      await fetch(`${serviceUrl}/api/retention/users`, {
        headers: { authorization: `Bearer ${retentionToken}` },
      })
    ).json() as Promise<string[]>;
  assert.deepEqual((await inactive()).sort(), [
    "forwarder@example.org",
    "keeper@example.org",
    "nosieve@example.org",
  ]);

  const sieveDir = join(dir, "sieve", "example.org");
  mkdirSync(sieveDir, { recursive: true });
  writeFileSync(
    join(sieveDir, "forwarder.sieve"),
    'require ["copy"];\n# all mail goes to the new address\nredirect "forwarder@elsewhere.net";\n',
  );
  writeFileSync(
    join(sieveDir, "keeper.sieve"),
    'if header :contains "subject" "invoice" {\n  redirect "books@elsewhere.net";\n}\n',
  );

  const janitor = await startJanitor({
    dir,
    env: {
      USERLI_URL: serviceUrl,
      USERLI_TOKEN: retentionToken,
      TOUCHER_SIEVE_LOCATION: join(dir, "sieve", "{domain}", "{local_part}.sieve"),
      TOUCHER_TICK_INTERVAL: "1h",
    },
  });
  await waitFor(
    "the forwarder to leave the retention list",
    async () => !(await inactive()).includes("forwarder@example.org"),
    20_000,
  );
  assert.deepEqual((await inactive()).sort(), ["keeper@example.org", "nosieve@example.org"]);
  const user = (await (
    await fetch(`${serviceUrl}/api/admin/users/forwarder@example.org`, {
      headers: { authorization: `Bearer ${adminToken}` },
    })
  ).json()) as { lastLoginTime: number };
  assert.ok(user.lastLoginTime > old, "the touch stored a recent activity time");
  assert.doesNotMatch(
    janitor.output(),
    new RegExp(retentionToken),
    "the token never reaches the janitor's log",
  );
  await janitor.stop();
});
