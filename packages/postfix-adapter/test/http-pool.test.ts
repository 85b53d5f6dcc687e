/**
 * The adapter's HTTP/1.1 client on its own: answer framing (Content-Length, chunked, until close,
 * interim 1xx), what it refuses, and the pool's behaviour with servers that close kept-alive
 * connections, say "Connection: close", hang or send bytes nobody asked for. The servers here are
 * raw TCP listeners scripted per test, standing for what a proxy or a broken server could do; the
 * real service is exercised by every other test file.
 */
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { after, describe, test } from "node:test";
import { AnswerParser, HttpError, HttpPool, RequestTimeout } from "../src/http-pool.ts";

const parse = (...chunks: string[]) => {
  const parser = new AnswerParser(1024);
  let answer: ReturnType<AnswerParser["push"]> = null;
  for (const chunk of chunks) answer = parser.push(Buffer.from(chunk, "latin1"));
  return answer && { ...answer, body: answer.body.toString() };
};

describe("answer parser", () => {
  test("Content-Length, split anywhere", () => {
    const text = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\ntrue";
    for (let cut = 1; cut < text.length; cut++) {
      assert.deepEqual(parse(text.slice(0, cut), text.slice(cut)), {
        status: 200,
        body: "true",
        keepAlive: true,
        extra: false,
      });
    }
  });

  test("chunked with extensions and trailers; interim 100 skipped; keep-alive per version and header", () => {
    assert.deepEqual(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n"), {
      status: 200,
      body: "[]",
      keepAlive: true,
      extra: false,
    });
    assert.equal(
      parse(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;x=y\r\n[\r\n1\r\n]\r\n0\r\nX-T: 1\r\n\r\n",
      )?.body,
      "[]",
    );
    assert.equal(
      parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}")?.status,
      404,
    );
    assert.equal(
      parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")?.keepAlive,
      false,
    );
    assert.equal(parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")?.keepAlive, false);
    assert.equal(
      parse("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")?.keepAlive,
      true,
    );
    assert.equal(parse("HTTP/1.1 204 No Content\r\n\r\n")?.status, 204);
    assert.equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1HTTP")?.extra, true);
  });

  for (const [name, text] of [
    ["a status line that is not HTTP/1.x", "SSH-2.0-OpenSSH\r\n\r\n"],
    ["a header line without a colon", "HTTP/1.1 200 OK\r\nnonsense\r\n\r\n"],
    ["a non-numeric Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 4x\r\n\r\n"],
    ["two different Content-Lengths", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n"],
    [
      "Content-Length and chunked",
      "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
    ],
    ["an unknown transfer coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"],
    ["a malformed chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"],
    ["a chunk without its CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]XX0\r\n\r\n"],
    ["a body over the limit", "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n"],
    ["a protocol switch", "HTTP/1.1 101 Switching Protocols\r\n\r\n"],
    ["headers over 16 KiB", `HTTP/1.1 200 OK\r\nX: ${"y".repeat(17_000)}`],
  ] as const) {
    test(`refused: ${name}`, () => {
      assert.throws(() => parse(text), HttpError);
    });
  }
});

describe("connection pool", () => {
  const servers: Server[] = [];
  after(() => {
    for (const server of servers) server.close();
  });

  /** A raw server: `onRequest` gets each request's head (and body) and the socket. */
  async function serve(onRequest: (head: string, socket: Socket, count: number) => void): Promise<URL> {
    let count = 0;
    const server = createServer((socket) => {
      let buffer = "";
      socket.setEncoding("latin1");
      socket.on("error", () => {});
      socket.on("data", (chunk: string) => {
        buffer += chunk;
        for (;;) {
          const end = buffer.indexOf("\r\n\r\n");
          if (end < 0) return;
          const head = buffer.slice(0, end);
          const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
          if (buffer.length < end + 4 + length) return;
          buffer = buffer.slice(end + 4 + length);
          count += 1;
          onRequest(head, socket, count);
        }
      });
    });
    servers.push(server);
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()));
    return new URL(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  }
  const pool = (url: URL, timeoutMs = 2000) =>
    new HttpPool({ url, maxConnections: 4, timeoutMs, maxBodyBytes: 1024 });
  const ok = (body: string) => `HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

  test("the request as sent: request line, Host, the caller's headers, Content-Length for a body", async () => {
    const heads: string[] = [];
    const url = await serve((head, socket) => {
      heads.push(head);
      socket.write(ok("true"));
    });
    const client = pool(url);
    const answer = await client.request("GET", "/api/mta/domain/example.org", "Authorization: Bearer t\r\n");
    assert.deepEqual({ status: answer.status, body: answer.body.toString() }, { status: 200, body: "true" });
    await client.request("POST", "/api/mta/auth", "Content-Type: application/json\r\n", Buffer.from("{}"));
    assert.equal(
      heads[0],
      `GET /api/mta/domain/example.org HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer t`,
    );
    assert.equal(
      heads[1],
      `POST /api/mta/auth HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: 2`,
    );
    client.close();
  });

  test("one connection is reused for one request after another", async () => {
    const sockets = new Set<Socket>();
    const url = await serve((_, socket) => {
      sockets.add(socket);
      socket.write(ok("1"));
    });
    const client = pool(url);
    for (let i = 0; i < 20; i++) await client.request("GET", "/", "");
    assert.equal(sockets.size, 1);
    client.close();
  });

  test("at most maxConnections at once; the others wait their turn", async () => {
    const sockets = new Set<Socket>();
    const url = await serve((_, socket) => {
      sockets.add(socket);
      setTimeout(() => socket.write(ok("1")), 20);
    });
    const client = pool(url);
    const answers = await Promise.all(Array.from({ length: 12 }, () => client.request("GET", "/", "")));
    assert.equal(answers.length, 12);
    assert.equal(sockets.size, 4);
    client.close();
  });

  test("a kept-alive connection the server closed: the request goes out again on a new one", async () => {
    const url = await serve((_, socket, count) => {
      // Answers, then closes the connection silently on the second request (as a server whose
      // keep-alive timer ran out just as the request arrived).
      if (count === 2) socket.destroy();
      else socket.write(ok(String(count)));
    });
    const client = pool(url);
    assert.equal((await client.request("GET", "/", "")).body.toString(), "1");
    assert.equal((await client.request("GET", "/", "")).body.toString(), "3");
    client.close();
  });

  test("Connection: close and a body until close: answered, and the connection is not reused", async () => {
    const sockets = new Set<Socket>();
    const url = await serve((_, socket) => {
      sockets.add(socket);
      socket.end('HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n["a@example.org"]');
    });
    const client = pool(url);
    assert.equal((await client.request("GET", "/", "")).body.toString(), '["a@example.org"]');
    assert.equal((await client.request("GET", "/", "")).body.toString(), '["a@example.org"]');
    assert.equal(sockets.size, 2);
    client.close();
  });

  test("no answer in time: RequestTimeout, and the connection is dropped", async () => {
    const url = await serve(() => {});
    const client = pool(url, 200);
    await assert.rejects(client.request("GET", "/", ""), RequestTimeout);
    client.close();
  });

  test("garbage, or bytes after the answer: that request fails or the connection is dropped, the next works", async () => {
    const sockets = new Set<Socket>();
    const url = await serve((head, socket) => {
      sockets.add(socket);
      if (head.includes("/garbage")) socket.write("HTTP/9 what\r\n\r\n");
      else if (head.includes("/extra"))
        socket.write(`${ok("1")}HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2`);
      else socket.write(ok("fine"));
    });
    const client = pool(url);
    await assert.rejects(client.request("GET", "/garbage", ""), HttpError);
    assert.equal((await client.request("GET", "/extra", "")).body.toString(), "1");
    assert.equal((await client.request("GET", "/next", "")).body.toString(), "fine");
    assert.equal(sockets.size, 3, "neither the garbled nor the overfull connection was reused");
    client.close();
  });

  test("nothing listening: the request fails at once", async () => {
    const url = await serve(() => {});
    servers.pop()?.close();
    await new Promise((done) => setTimeout(done, 50));
    const client = pool(url);
    await assert.rejects(client.request("GET", "/", ""), /ECONNREFUSED|closed/);
    client.close();
  });
});
