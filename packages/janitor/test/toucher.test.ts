/**
 * The toucher against a small real HTTP server playing the service's retention API. Only USERLI_URL
 * points elsewhere, so the same daemon runs unchanged against the real account service.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { cleanup, type Janitor, readLines, startJanitor, TOKEN, tempDir, waitFor } from "./helpers.ts";

const dirs: string[] = [];
const servers: Server[] = [];
after(async () => {
  await cleanup(...dirs);
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
});

interface Touch {
  email: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: string;
}

interface FakeService {
  url: string;
  users: unknown[];
  listRequests: { path: string; authorization: string | undefined }[];
  touches: Touch[];
  /** Status for the next list requests (200 by default). */
  listStatus: number;
  failTouch: Set<string>;
}

/** A retention API: GET .../api/retention/users lists `users`, PUT .../api/retention/{email}/touch records the call. */
async function fakeService(users: unknown[]): Promise<FakeService> {
  const service: FakeService = {
    url: "",
    users,
    listRequests: [],
    touches: [],
    listStatus: 200,
    failTouch: new Set(),
  };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const path = request.url ?? "";
      const authorization = request.headers.authorization;
      if (request.method === "GET" && path.endsWith("/api/retention/users")) {
        service.listRequests.push({ path, authorization });
        if (authorization !== `Bearer ${TOKEN}`) {
          response.writeHead(401, { "Content-Type": "application/json" }).end('{"message":"unauthorized"}');
        } else if (service.listStatus !== 200) {
          response
            .writeHead(service.listStatus, { "Content-Type": "application/json" })
            .end('{"message":"down"}');
        } else {
          response.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(service.users));
        }
        return;
      }
      const touch = /\/api\/retention\/([^/]+)\/touch$/.exec(path);
      if (request.method === "PUT" && touch) {
        const email = decodeURIComponent(touch[1] as string);
        service.touches.push({
          email,
          authorization,
          contentType: request.headers["content-type"],
          body: Buffer.concat(chunks).toString("utf8"),
        });
        if (service.failTouch.has(email)) {
          response.writeHead(500, { "Content-Type": "application/json" }).end('{"message":"boom"}');
        } else {
          response.writeHead(200, { "Content-Type": "application/json" }).end("[]");
        }
        return;
      }
      response.writeHead(404).end();
    });
  });
  servers.push(server);
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const address = server.address();
  service.url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  return service;
}

function writeSieve(dir: string, email: string, script: string): void {
  const [local, domain] = email.split("@") as [string, string];
  mkdirSync(join(dir, "sieve", domain), { recursive: true });
  writeFileSync(join(dir, "sieve", domain, `${local}.sieve`), script);
}

async function janitor(env: Record<string, string>, dir: string): Promise<Janitor> {
  const started = await startJanitor({ dir, env });
  return started;
}

const FORWARD =
  'require ["fileinto"];\n# rule:[forward all]\nif true\n{\n\tredirect "elsewhere@other.example";\n}\n';

describe("toucher", () => {
  test("touches exactly the users whose script forwards everything, and goes on after errors", async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const service = await fakeService([
      "forwarder@example.org",
      "keeper@example.org",
      "conditional@example.org",
      "nosieve@example.org",
      "broken@example.org",
      "bad$(touch pwned)@example.org",
      "touchfails@example.org",
      { email: "object.form@example.org" },
      "after.errors@example.net",
    ]);
    service.failTouch.add("touchfails@example.org");
    writeSieve(dir, "forwarder@example.org", FORWARD);
    writeSieve(dir, "keeper@example.org", 'redirect "x@other.example";\nkeep;\n');
    writeSieve(
      dir,
      "conditional@example.org",
      'if header :contains "subject" "fwd" { redirect "x@other.example"; }\n',
    );
    writeSieve(dir, "broken@example.org", 'if true { redirect "x@other.example";\n');
    writeSieve(dir, "touchfails@example.org", 'redirect "x@other.example";');
    writeSieve(dir, "object.form@example.org", 'redirect "x@other.example";');
    writeSieve(
      dir,
      "after.errors@example.net",
      "/* only forwarding */ redirect text:\nx@other.example\n.\n;",
    );

    const j = await janitor({ USERLI_URL: `${service.url}/`, TOUCHER_TICK_INTERVAL: "1h" }, dir);
    const done = await j.waitForLog("a toucher tick", (line) => line.msg === "toucher tick done");
    assert.deepEqual(
      service.touches.map((t) => t.email),
      [
        "forwarder@example.org",
        "touchfails@example.org",
        "object.form@example.org",
        "after.errors@example.net",
      ],
    );
    for (const touch of service.touches) {
      assert.equal(touch.authorization, `Bearer ${TOKEN}`);
      assert.equal(touch.contentType, "application/json");
      assert.equal(touch.body, "{}");
    }
    assert.deepEqual(service.listRequests, [
      { path: "/api/retention/users", authorization: `Bearer ${TOKEN}` },
    ]);
    assert.equal(done["users"], 9);
    assert.equal(done["touched"], 3);
    assert.equal(done["forwarding"], 4);
    assert.equal(done["failed"], 2);
    assert.ok(
      j.logs.some((line) => line.level === "warn" && line.msg.startsWith("could not check or touch")),
    );
    assert.ok(j.logs.some((line) => line.level === "warn" && line.msg === "Sieve script does not parse"));
    assert.ok(j.logs.some((line) => line.level === "warn" && String(line["email"]).startsWith("bad$")));
    assert.deepEqual(readLines(join(dir, "pwned")), []);
  });

  test("ticks at start and every TOUCHER_TICK_INTERVAL; a service error is logged and the next tick works", async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const service = await fakeService(["forwarder@example.org"]);
    service.listStatus = 503;
    writeSieve(dir, "forwarder@example.org", FORWARD);
    const j = await janitor(
      { USERLI_URL: `${service.url}/retention-prefix`, TOUCHER_TICK_INTERVAL: "1s" },
      dir,
    );
    const failure = await j.waitForLog(
      "the failed fetch",
      (line) => line.msg === "could not fetch the retention list",
    );
    assert.equal(failure.level, "error");
    assert.match(String(failure["err"]), /503/);
    assert.equal(service.touches.length, 0);
    service.listStatus = 200;
    await waitFor("a touch on a later tick", () => service.touches.length >= 1);
    assert.equal(service.listRequests[0]?.path, "/retention-prefix/api/retention/users");
    await waitFor("a third tick", () => service.listRequests.length >= 3);
  });

  test("a wrong token is reported and nothing is touched", async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const service = await fakeService(["forwarder@example.org"]);
    writeSieve(dir, "forwarder@example.org", FORWARD);
    const j = await janitor({ USERLI_URL: service.url, USERLI_TOKEN: "wrong" }, dir);
    const failure = await j.waitForLog(
      "the failed fetch",
      (line) => line.msg === "could not fetch the retention list",
    );
    assert.match(String(failure["err"]), /401/);
    assert.equal(service.touches.length, 0);
    assert.doesNotMatch(j.output(), /Bearer/);
  });

  test("with TOUCHER_USE_SUDO the script is read through `sudo -n cat <path>`", async () => {
    const dir = await tempDir();
    dirs.push(dir);
    // A stand-in for sudo first on PATH: records its arguments, then runs the command as is.
    const bin = join(dir, "bin");
    mkdirSync(bin);
    writeFileSync(
      join(bin, "sudo"),
      `#!/bin/sh\nprintf '%s\\n' "$*" >> '${join(dir, "sudo-calls")}'\n[ "$1" = "-n" ] || exit 1\nshift\nexec "$@"\n`,
    );
    chmodSync(join(bin, "sudo"), 0o755);
    const service = await fakeService(["forwarder@example.org", "nosieve@example.org"]);
    writeSieve(dir, "forwarder@example.org", FORWARD);
    const j = await janitor(
      {
        USERLI_URL: service.url,
        TOUCHER_USE_SUDO: "true",
        PATH: `${bin}:${process.env["PATH"] ?? "/usr/bin:/bin"}`,
      },
      dir,
    );
    const done = await j.waitForLog("a toucher tick", (line) => line.msg === "toucher tick done");
    assert.equal(done["failed"], 0);
    assert.deepEqual(
      service.touches.map((t) => t.email),
      ["forwarder@example.org"],
    );
    assert.deepEqual(readLines(join(dir, "sudo-calls")), [
      `-n cat ${join(dir, "sieve", "example.org", "forwarder.sieve")}`,
      `-n cat ${join(dir, "sieve", "example.org", "nosieve.sieve")}`,
    ]);
  });
});
