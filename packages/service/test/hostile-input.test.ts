import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import { announcedBodyWaitMs } from "../src/http/announced-body.ts";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestResponse, type TestService } from "./helpers/service.ts";

/** Every error, whoever makes it, is `{"message": ...}`: no codes, no echoed URL, no internals. */
function assertPlainError(res: TestResponse | RawResponse, status: number, message?: string) {
  const text = "text" in res ? res.text : res.body;
  assert.equal(res.status, status, text);
  const body = JSON.parse(text);
  assert.deepEqual(Object.keys(body), ["message"], text);
  if (message !== undefined) assert.equal(body.message, message);
  assert.doesNotMatch(text, /FST_|statusCode|\/api\//, text);
}

interface RawResponse {
  status: number;
  body: string;
}

/** A request written byte for byte on a socket: what fetch refuses to send. */
function rawRequest(url: string, request: string): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    socket.setTimeout(5000, () => socket.destroy());
    let data = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk) => {
      data += chunk;
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      const match = /^HTTP\/1\.1 (\d{3})[\s\S]*?\r\n\r\n([\s\S]*)$/.exec(data);
      if (!match) reject(new Error(`no HTTP answer: ${JSON.stringify(data.slice(0, 200))}`));
      else resolve({ status: Number(match[1]), body: match[2] ?? "" });
    });
  });
}

describe("hostile input", () => {
  let service: TestService;
  let tokens: Record<"mailboxServer" | "mta" | "identity" | "admin", string>;

  before(async () => {
    service = await startService();
    const [mailboxServer, mta, identity, admin] = await Promise.all([
      service.token("mailbox-server"),
      service.token("mta"),
      service.token("identity"),
      service.token("admin"),
    ]);
    tokens = { mailboxServer, mta, identity, admin } as typeof tokens;
    const { domains, users, aliases } = service.services;
    await domains.create("example.org");
    for (const local of ["alice", "bob", "carol"]) {
      await users.create({ email: `${local}@example.org`, password, mailCrypt: false });
    }
    await aliases.create({ source: "team@example.org", owner: "alice@example.org" });
  });
  after(() => service.close());

  describe("Fastify's own errors are plain {message}", () => {
    for (const path of [
      "/api/mailbox-server/%zz@example.org",
      "/api/mailbox-server/%FF@example.org",
      "/api/mailbox-server/%ED%A0%80@example.org",
      "/api/mta/mailbox/%C0%AF@example.org",
      "/api/identity/exa%zzmple.org/count",
    ]) {
      test(`a path that is not percent-encoded UTF-8: ${path}`, async () => {
        const res = await service.request("GET", path, { token: tokens.mailboxServer });
        assertPlainError(res, 400, "invalid URL encoding");
      });
    }

    test("malformed JSON, unsupported type, too large body", async () => {
      const badJson = await service.request("POST", "/api/mta/auth", {
        token: tokens.mta,
        headers: { "content-type": "application/json" },
        body: '{"email":',
      });
      assertPlainError(badJson, 400, 'Request payload contains invalid "json" data.');
      const unsupported = await service.request("POST", "/api/mta/auth", {
        token: tokens.mta,
        headers: { "content-type": "text/xml" },
        body: "<a/>",
      });
      assertPlainError(unsupported, 415, "Unsupported format.");
      const tooLarge = await service.request("POST", "/api/mta/auth", {
        token: tokens.mta,
        json: { email: "alice@example.org", password: "x".repeat(70_000) },
      });
      assertPlainError(tooLarge, 413, "Request body too large (limit 64 KiB).");
    });

    test("a request line past Node's header limit: 431 with a plain body", async () => {
      const long = `/api/mta/mailbox/${"a".repeat(20_000)}@example.org`;
      const res = await rawRequest(
        service.url,
        `GET ${long} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tokens.mta}\r\n\r\n`,
      );
      assertPlainError({ status: res.status, body: res.body }, 431);
    });

    test("a header Node cannot parse: 400 with a plain body", async () => {
      const res = await rawRequest(service.url, "GET /health HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n");
      assertPlainError(res, 400);
    });
  });

  describe("a too long path parameter is a bad address, not a 414", () => {
    const long = "a".repeat(1100);
    for (const [path, token, message] of [
      [`/api/mailbox-server/${long}@example.org`, "mailboxServer", "invalid e-mail address"],
      [`/api/mta/mailbox/${long}@example.org`, "mta", "invalid e-mail address"],
      [`/api/mta/alias/${long}@example.org`, "mta", "invalid e-mail address"],
      [`/api/mta/domain/${long}.org`, "mta", "invalid domain name"],
      [`/api/identity/${long}.org`, "identity", "invalid domain name"],
      [`/api/identity/${long}.org/count`, "identity", "invalid domain name"],
    ] as const) {
      test(`${path.slice(0, 30)}… (${path.length} characters)`, async () => {
        const res = await service.request("GET", path, { token: tokens[token] });
        assertPlainError(res, 400, message);
      });
    }
  });

  describe("a NUL in search is refused (http/params.ts), on every database", () => {
    test("identity search", async () => {
      const all = await service.request("GET", "/api/identity/example.org", { token: tokens.identity });
      assert.equal(all.body.length, 3);
      for (const search of ["%00", "a%00", "%00a", "alice%00"]) {
        const res = await service.request("GET", `/api/identity/example.org?search=${search}`, {
          token: tokens.identity,
        });
        assertPlainError(res, 400, "invalid input: NUL character");
      }
    });

    for (const list of ["users", "domains", "aliases"]) {
      test(`admin list /${list}`, async () => {
        const all = await service.request("GET", `/api/admin/${list}`, { token: tokens.admin });
        assert.ok(all.body.total > 0);
        const res = await service.request("GET", `/api/admin/${list}?search=%00`, { token: tokens.admin });
        assertPlainError(res, 400, "invalid input: NUL character");
      });
    }
  });

  describe("query integers: any whole number, capped as documented", () => {
    test("identity max and first of 11 digits and more are capped", async () => {
      for (const [query, expected] of [
        ["max=99999999999", 3],
        ["max=999999999999999999999999", 3],
        ["max=1&first=99999999999", 0],
        ["first=999999999999999999999999", 0],
        ["max=-3", 3],
        ["max=2&first=-1", 2],
      ] as const) {
        const res = await service.request("GET", `/api/identity/example.org?${query}`, {
          token: tokens.identity,
        });
        assert.equal(res.status, 200, `${query}: ${res.text}`);
        assert.equal(res.body.length, expected, query);
      }
    });

    test("what is not a whole number stays 400 on the integration API", async () => {
      for (const query of ["max=abc", "max=1e3", "max=0x10", "first=1.5", "max=%2B5", "max=1&max=2"]) {
        const res = await service.request("GET", `/api/identity/example.org?${query}`, {
          token: tokens.identity,
        });
        assertPlainError(res, 400);
        assert.match(res.body.message, /^(max|first): must be a whole number$/, query);
      }
    });

    test("the admin lists read the same way and answer 422, as their other fields do", async () => {
      const big = await service.request("GET", "/api/admin/users?limit=99999999999", { token: tokens.admin });
      assertPlainError(big, 422, "limit: at most 500");
      const notNumber = await service.request("GET", "/api/admin/users?limit=ten", { token: tokens.admin });
      assertPlainError(notNumber, 422, "limit: must be a whole number");
      const page = await service.request("GET", "/api/admin/users?limit=2&offset=1", { token: tokens.admin });
      assert.equal(page.body.items.length, 2);
    });
  });

  describe("addresses (issue 17, regression cases)", () => {
    for (const email of [
      "*@example.org",
      "`id`@example.org",
      "pl\u0430in@example.org",
      "\u212Aate@example.org",
    ]) {
      test(`the admin API does not create ${JSON.stringify(email)}`, async () => {
        const res = await service.request("POST", "/api/admin/users", {
          token: tokens.admin,
          json: { email, password },
        });
        assertPlainError(res, 422);
        const users = await service.services.users.list(
          { search: "", limit: 500, offset: 0 },
          { status: "all" },
        );
        assert.ok(!users.items.some((user) => user.email === email || user.email === "kate@example.org"));
      });
    }

    test("the Kelvin sign in a path is not folded to k", async () => {
      await service.services.users.create({ email: "kate@example.org", password, mailCrypt: false });
      const plain = await service.request("GET", "/api/mailbox-server/kate@example.org", {
        token: tokens.mailboxServer,
      });
      assert.equal(plain.status, 200);
      for (const path of [
        "/api/mailbox-server/%E2%84%AAate@example.org",
        "/api/mta/mailbox/%E2%84%AAate@example.org",
      ]) {
        const res = await service.request("GET", path, {
          token: path.includes("mta") ? tokens.mta : tokens.mailboxServer,
        });
        assert.notEqual(res.status, 200, path);
        assert.doesNotMatch(res.text, /kate/);
      }
    });
  });
});

/**
 * A request announcing its body with `Expect: 100-continue`, as Dovecot's Lua passdb sends every
 * sign-in: the `100 Continue`, whatever comes before the body is sent, and the answer after it.
 */
async function announcedBodyExchange(
  url: string,
  head: string,
  body: string | null,
): Promise<{ continued: boolean; beforeBody: string; answer: string; answeredAfterMs: number }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.setEncoding("latin1");
  let data = "";
  socket.on("data", (chunk: string) => {
    data += chunk;
  });
  socket.on("error", () => {});
  const until = async (done: () => boolean, ms: number) => {
    const deadline = Date.now() + ms;
    while (!done() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  };
  try {
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    const sentAt = Date.now();
    socket.write(head);
    if (/^expect: 100-continue\r$/im.test(head))
      await until(() => data.startsWith("HTTP/1.1 100 Continue\r\n\r\n"), 2000);
    const continued = data.startsWith("HTTP/1.1 100 Continue\r\n\r\n");
    const afterContinue = () => (continued ? data.slice(25) : data);
    // Long enough for an early answer to arrive, as it did before: at once.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const beforeBody = afterContinue();
    if (body !== null) socket.write(body);
    await until(() => /\r\n\r\n\{.*\}$/s.test(afterContinue()), 5000);
    return { continued, beforeBody, answer: afterContinue(), answeredAfterMs: Date.now() - sentAt };
  } finally {
    socket.destroy();
  }
}

describe("a body announced with Expect: 100-continue (Dovecot's passdb)", () => {
  let service: TestService;
  let tokens: Record<"mailboxServer" | "mta", string>;
  const body = JSON.stringify({ password: "not the password at all" });
  const head = (token: string, extra = "") =>
    `POST /api/mailbox-server/alice@example.org HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
  const expect = "Expect: 100-continue\r\n";

  before(async () => {
    service = await startService();
    tokens = { mailboxServer: await service.token("mailbox-server"), mta: await service.token("mta") };
    await service.services.domains.create("example.org");
    await service.services.users.create({ email: "alice@example.org", password, mailCrypt: false });
  });
  after(() => service.close());

  test("a refused token is answered after the body, not together with the 100 Continue", async () => {
    for (const [token, status] of [
      ["0".repeat(64), "401 Unauthorized"],
      [tokens.mta, "403 Forbidden"],
    ] as const) {
      const exchange = await announcedBodyExchange(service.url, head(token, expect), body);
      assert.ok(exchange.continued, "Node's 100 Continue first");
      assert.equal(exchange.beforeBody, "", `nothing before the body: ${exchange.beforeBody}`);
      assert.match(exchange.answer, new RegExp(`^HTTP/1\\.1 ${status}\\r\\n`));
    }
  });

  test("a sign-in is answered after the body as always", async () => {
    const exchange = await announcedBodyExchange(service.url, head(tokens.mailboxServer, expect), body);
    assert.ok(exchange.continued);
    assert.equal(exchange.beforeBody, "");
    assert.match(exchange.answer, /^HTTP\/1\.1 401 Unauthorized\r\n[\s\S]*"authentication failed"/);
  });

  test("a body announced and never sent: the answer comes after the bounded wait", async () => {
    const exchange = await announcedBodyExchange(service.url, head("0".repeat(64), expect), null);
    assert.match(exchange.answer, /^HTTP\/1\.1 401 Unauthorized\r\n/);
    assert.ok(exchange.answeredAfterMs >= announcedBodyWaitMs - 100, `${exchange.answeredAfterMs} ms`);
  });

  test("without Expect the refusal comes at once, before any body", async () => {
    const exchange = await announcedBodyExchange(service.url, head("0".repeat(64)), null);
    assert.ok(!exchange.continued);
    assert.match(exchange.beforeBody, /^HTTP\/1\.1 401 Unauthorized\r\n/);
  });
});

describe("a request that completes while the service closes", () => {
  test("gets a plain 503, not Fastify's error body", async () => {
    const service = await startService();
    const { port } = new URL(service.url);
    const answer = await new Promise<string>((resolve) => {
      // An unfinished request on another connection keeps the close waiting.
      const busy = connect(Number(port), "127.0.0.1", () =>
        busy.write(
          "POST /api/mta/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{",
        ),
      );
      busy.on("error", () => {});
      const socket = connect(Number(port), "127.0.0.1", () => {
        socket.write("GET /health HTTP/1.1\r\nHost: x\r\n");
        setTimeout(() => {
          void service.close();
          setTimeout(() => socket.write("\r\n"), 20);
          setTimeout(() => busy.end("}"), 100);
        }, 50);
      });
      let text = "";
      socket.setEncoding("utf8");
      socket.on("data", (chunk) => {
        text += chunk;
      });
      socket.on("close", () => resolve(text));
      socket.on("error", () => {});
    });
    const match = /^HTTP\/1\.1 (\d{3})[\s\S]*?\r\n\r\n([\s\S]*)$/.exec(answer);
    assert.ok(match, answer);
    assertPlainError({ status: Number(match[1]), body: match[2] ?? "" }, 503, "shutting down, try again");
  });
});

describe("an unexpected fault", () => {
  test("on passdb (whose 500 schema also has the key failure's shape) is a plain 500", async () => {
    const service = await startService();
    try {
      await service.services.domains.create("example.org");
      await service.services.users.create({ email: "alice@example.org", password, mailCrypt: false });
      const token = await service.token("mailbox-server");
      // A table gone behind the service's back: a query error that is not "database unavailable".
      await sql`ALTER TABLE users RENAME TO users_gone`.execute(service.services.database.db);
      const res = await service.request("POST", "/api/mailbox-server/alice@example.org", {
        token,
        json: { password },
      });
      assertPlainError(res, 500, "internal error");
    } finally {
      await service.close();
    }
  });
});
