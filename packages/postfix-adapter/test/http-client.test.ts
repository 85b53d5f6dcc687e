/**
 * The adapter's own HTTP/1.1 client (http-client.ts) against raw local servers that write exactly
 * the bytes each case needs: the framings it accepts (Content-Length, chunked with and without
 * trailers, until close, interim 1xx, 204), what it refuses (and that a refusal closes only that
 * connection), the queue behind a full pool within the time limit, and close(). ServiceClient's
 * use of it (retries, TLS, the 1 MiB limit) is in service-client.test.ts.
 */
import assert from "node:assert/strict";
import type { Server, Socket } from "node:net";
import { after, describe, test } from "node:test";
import { HttpError, HttpPool } from "../src/http-client.ts";
import { scriptedHttpServer } from "./helpers.ts";

const servers: Server[] = [];
const pools: HttpPool[] = [];
after(async () => {
  for (const pool of pools) await pool.close();
  for (const server of servers) server.close();
});

async function rawServer(reply: (head: string, socket: Socket, count: number) => void) {
  const scripted = await scriptedHttpServer((head, _, socket, count) => reply(head, socket, count));
  servers.push(scripted.server);
  return scripted;
}

function pool(url: URL, options: { maxConnections?: number; timeoutMs?: number } = {}): HttpPool {
  const created = new HttpPool({
    url,
    maxConnections: options.maxConnections ?? 4,
    timeoutMs: options.timeoutMs ?? 2000,
    maxBodyBytes: 1024,
  });
  pools.push(created);
  return created;
}

const get = (client: HttpPool, path = "/") => client.request("GET", path, "accept: application/json\r\n");

describe("the adapter's HTTP client", () => {
  test("the request as written: one line per header, Host, Content-Length for a body in UTF-8", async () => {
    const heads: string[] = [];
    const server = await rawServer((head, socket) => {
      heads.push(head);
      socket.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    });
    const client = pool(server.url);
    const answer = await client.request("POST", "/api/x", "content-type: application/json\r\n", '{"p":"ü"}');
    assert.equal(answer.status, 200);
    assert.equal(answer.body.toString(), "ok");
    assert.equal(
      heads[0],
      `POST /api/x HTTP/1.1\r\nhost: ${server.url.host}\r\ncontent-type: application/json\r\ncontent-length: 10`,
    );
  });

  test("chunked bodies, with and without trailers, interim 1xx answers and 204: read whole, connection kept", async () => {
    const server = await rawServer((head, socket) => {
      if (head.includes("/chunked"))
        socket.write(
          'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n["a\r\n2;ext=1\r\n"]\r\n0\r\n\r\n',
        );
      else if (head.includes("/trailers"))
        socket.write(
          "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n4\r\ntrue\r\n0\r\nX-Check: 1\r\n\r\n",
        );
      else if (head.includes("/continue"))
        socket.write("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfalse");
      else socket.write("HTTP/1.1 204 No Content\r\n\r\n");
    });
    const client = pool(server.url);
    assert.equal((await get(client, "/chunked")).body.toString(), '["a"]');
    assert.equal((await get(client, "/trailers")).body.toString(), "true");
    assert.equal((await get(client, "/continue")).body.toString(), "false");
    const empty = await get(client, "/none");
    assert.equal(empty.status, 204);
    assert.equal(empty.body.length, 0);
    assert.equal(server.sockets.size, 1, "one kept-alive connection for all four");
  });

  test("a status line without a reason phrase is read", async () => {
    const server = await rawServer((_, socket) =>
      socket.write("HTTP/1.1 200\r\nContent-Length: 4\r\n\r\ntrue"),
    );
    const answer = await get(pool(server.url));
    assert.equal(answer.status, 200);
    assert.equal(answer.body.toString(), "true");
  });

  test("an answer split into single bytes is put together", async () => {
    const server = await rawServer((_, socket) => {
      const bytes = Buffer.from("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ntrue");
      let n = 0;
      const next = () => {
        if (n < bytes.length) socket.write(bytes.subarray(n, ++n), () => setImmediate(next));
      };
      next();
    });
    const answer = await get(pool(server.url));
    assert.equal(answer.body.toString(), "true");
  });

  test("HTTP/1.0 and Connection: close are answered, and the connection is not used again", async () => {
    const server = await rawServer((head, socket) => {
      if (head.includes("/old")) socket.write("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n1");
      else socket.write("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n2");
    });
    const client = pool(server.url);
    assert.equal((await get(client, "/old")).body.toString(), "1");
    assert.equal((await get(client, "/close")).body.toString(), "2");
    assert.equal((await get(client, "/close")).body.toString(), "2");
    assert.equal(server.sockets.size, 3);
  });

  for (const [name, bytes] of [
    ["a status line that is not HTTP/1.x", "HTTP/2 200 OK\r\n\r\n"],
    ["a status code that is not three digits", "HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n"],
    ["a status code followed by something else", "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"],
    ["a header line without a colon", "HTTP/1.1 200 OK\r\nContent-Length 4\r\n\r\ntrue"],
    ["a Content-Length that is not a number", "HTTP/1.1 200 OK\r\nContent-Length: 4x\r\n\r\ntrue"],
    [
      "two different Content-Lengths",
      "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\ntrue",
    ],
    [
      "both Content-Length and chunked",
      "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
    ],
    ["a transfer coding other than chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"],
    ["a malformed chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"],
    ["a chunk without its CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX0\r\n\r\n"],
    ["a protocol switch", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n"],
    ["a body over the limit", "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n"],
    [
      "a chunked body over the limit",
      `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${(2000).toString(16)}\r\n`,
    ],
    ["a head over 16 KiB", `HTTP/1.1 200 OK\r\nX-Filler: ${"x".repeat(17_000)}\r\n\r\n`],
  ] as const) {
    test(`refused: ${name}; that connection closes, the next request gets a new one`, async () => {
      const server = await rawServer((head, socket) => {
        socket.write(head.includes("/bad") ? bytes : "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ntrue");
      });
      const client = pool(server.url);
      await assert.rejects(get(client, "/bad"), (error: unknown) => {
        assert.ok(error instanceof HttpError);
        assert.equal(error.kind, "protocol");
        return true;
      });
      assert.equal((await get(client, "/good")).body.toString(), "true");
      assert.equal(server.sockets.size, 2);
    });
  }

  test("bytes nobody asked for close the idle connection; the next request goes out on a new one", async () => {
    const server = await rawServer((_, socket) => {
      socket.write("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ntrue");
      setTimeout(() => socket.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfalse"), 50);
    });
    const client = pool(server.url);
    assert.equal((await get(client)).body.toString(), "true");
    await new Promise((done) => setTimeout(done, 150));
    assert.equal((await get(client)).body.toString(), "true");
    assert.equal(server.sockets.size, 2);
  });

  test("a full pool: the others wait their turn, and one waiting longer than the time limit fails", async () => {
    const server = await rawServer((head, socket) => {
      const delay = head.includes("/slow") ? 400 : 0;
      setTimeout(() => socket.write("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ntrue"), delay);
    });
    const client = pool(server.url, { maxConnections: 1, timeoutMs: 250 });
    const slow = get(client, "/slow");
    const waiting = get(client, "/fast");
    const started = Date.now();
    await assert.rejects(slow, (error: unknown) => error instanceof HttpError && error.kind === "timeout");
    await assert.rejects(waiting, (error: unknown) => error instanceof HttpError && error.kind === "timeout");
    assert.ok(Date.now() - started < 1000);
    // The pool recovers: the slow connection was closed, a new one answers.
    assert.equal((await get(client, "/fast")).body.toString(), "true");
  });

  test("close(): requests under way are answered, new ones fail at once", async () => {
    const server = await rawServer((_, socket) => {
      setTimeout(() => socket.write("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ntrue"), 100);
    });
    const client = new HttpPool({ url: server.url, maxConnections: 2, timeoutMs: 2000, maxBodyBytes: 1024 });
    const underWay = [get(client), get(client), get(client)];
    const closed = client.close();
    assert.equal(client.close(), closed, "closing again waits for the same end");
    await assert.rejects(
      get(client),
      (error: unknown) => error instanceof HttpError && error.kind === "closed",
    );
    const answers = await Promise.all(underWay);
    assert.deepEqual(
      answers.map((answer) => answer.body.toString()),
      ["true", "true", "true"],
    );
    await closed;
    await new Promise((done) => setTimeout(done, 50));
    assert.ok([...server.sockets].every((socket) => socket.destroyed || socket.readableEnded));
  });
});
