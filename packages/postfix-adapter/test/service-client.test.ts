/**
 * The adapter's HTTP side on its own: ServiceClient (http-client.ts underneath) against real local
 * servers scripted per test, standing for what the service, a proxy in front of it or a broken
 * server can do: keep-alive and the pool's size, a kept-alive connection closed under a request
 * (a lookup goes out once more, a sign-in never twice), "Connection: close", no answer in time,
 * an answer too large or garbled, nothing listening, and TLS with a certificate trusted or not.
 * The real service is exercised by every other test file.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { getCACertificates, setDefaultCACertificates } from "node:tls";
import { createLogger } from "../src/logger.ts";
import { Metrics } from "../src/metrics.ts";
import { ServiceClient, ServiceUnavailable } from "../src/service-client.ts";
import { scriptedHttpServer } from "./helpers.ts";

type Closable = { close(): unknown; closeAllConnections?: () => void };
const servers: Closable[] = [];
const clients: ServiceClient[] = [];
after(async () => {
  for (const client of clients) await client.close();
  for (const server of servers) {
    server.closeAllConnections?.();
    server.close();
  }
});

function portOf(server: Server): number {
  return (server.address() as { port: number }).port;
}

async function listen<T extends Server>(server: T): Promise<T> {
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()));
  return server;
}

function serviceClient(baseUrl: string, timeoutMs = 2000): { client: ServiceClient; metrics: Metrics } {
  const metrics = new Metrics();
  const client = new ServiceClient({
    baseUrl,
    token: "t0ken",
    timeoutMs,
    logger: createLogger("error", { write: () => {} }),
    metrics,
  });
  clients.push(client);
  return { client, metrics };
}

/** A node:http server answering each request with `handle`; counts the connections it accepted. */
async function httpServer(handle: (request: IncomingMessage, response: ServerResponse) => void) {
  const sockets = new Set<Socket>();
  const server = createHttpServer(handle);
  server.on("connection", (socket: Socket) => sockets.add(socket));
  servers.push(server);
  await listen(server);
  return { url: `http://127.0.0.1:${portOf(server)}`, sockets };
}

/** A raw server writing whatever each test needs (helpers.ts), closed after the tests. */
async function rawServer(onRequest: (head: string, body: string, socket: Socket, count: number) => void) {
  const scripted = await scriptedHttpServer(onRequest);
  servers.push(scripted.server);
  return { ...scripted, url: scripted.url.origin };
}

const json = (body: unknown) => {
  const text = JSON.stringify(body);
  return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
};

describe("ServiceClient over HTTP", () => {
  test("the requests as sent: path under SERVICE_URL's prefix, the token, JSON, X-Client-Address", async () => {
    const seen: Array<{ method?: string; url?: string; headers: IncomingMessage["headers"]; body: string }> =
      [];
    const { url } = await httpServer((request, response) => {
      let body = "";
      request.on("data", (chunk) => (body += chunk));
      request.on("end", () => {
        seen.push({ method: request.method, url: request.url, headers: request.headers, body });
        response.setHeader("content-type", "application/json");
        response.end(request.method === "POST" ? '{"message":"ok"}' : "true");
      });
    });
    const { client, metrics } = serviceClient(`${url}/prefix/`);
    assert.equal(await client.domain("example.org"), true);
    assert.equal(await client.authenticate("alice@example.org", "pass word", "2001:db8::1"), "success");
    assert.equal(await client.authenticate("alice@example.org", "pw", "not an address\r\nX: y"), "success");
    assert.deepEqual(
      seen.map(({ method, url }) => `${method} ${url}`),
      ["GET /prefix/api/mta/domain/example.org", "POST /prefix/api/mta/auth", "POST /prefix/api/mta/auth"],
    );
    assert.equal(seen[0]?.headers.authorization, "Bearer t0ken");
    assert.equal(seen[0]?.headers.accept, "application/json");
    assert.equal(seen[1]?.headers["content-type"], "application/json");
    assert.equal(seen[1]?.headers["x-client-address"], "2001:db8::1");
    assert.deepEqual(JSON.parse(seen[1]?.body ?? ""), { email: "alice@example.org", password: "pass word" });
    assert.equal(seen[2]?.headers["x-client-address"], undefined, "not an IP address: left out");
    assert.equal(metrics.serviceRequests.get({ endpoint: "domain", outcome: "200" }), 1);
    assert.equal(metrics.serviceRequests.get({ endpoint: "auth", outcome: "200" }), 2);
  });

  test("kept-alive connections carry lookup after lookup", async () => {
    const { url, sockets } = await httpServer((_, response) => response.end('["a@example.org"]'));
    const { client } = serviceClient(url);
    for (let i = 0; i < 50; i++) assert.deepEqual(await client.alias("team@example.org"), ["a@example.org"]);
    assert.equal(sockets.size, 1, `${sockets.size} connections for 50 lookups`);
  });

  test("at most 64 connections at once; the other requests wait their turn", async () => {
    let open = 0;
    let most = 0;
    const { url, sockets } = await httpServer((_, response) => {
      open += 1;
      most = Math.max(most, open);
      setTimeout(() => {
        open -= 1;
        response.end("false");
      }, 30);
    });
    const { client } = serviceClient(url);
    const answers = await Promise.all(
      Array.from({ length: 150 }, (_, n) => client.mailbox(`u${n}@example.org`)),
    );
    assert.equal(answers.length, 150);
    assert.ok(
      answers.every((answer) => answer === false),
      "every lookup answered",
    );
    assert.equal(most, 64);
    assert.equal(sockets.size, 64);
  });

  test("a kept-alive connection closed under a lookup: the lookup goes out again on a new one", async () => {
    const server = await rawServer((_, __, socket, count) => {
      // Answers, then closes the connection without a word on the second request (as a server
      // whose keep-alive timer ran out just as the request arrived).
      if (count === 2) socket.destroy();
      else socket.write(json(count === 1)); // 1: true, then 3: false
    });
    const { client } = serviceClient(server.url);
    assert.equal(await client.domain("example.org"), true);
    assert.equal(await client.domain("example.org"), false);
    assert.equal(server.requests(), 3);
    assert.equal(server.sockets.size, 2);
  });

  test("a connection closed under a sign-in: never sent twice (the service may have counted it)", async () => {
    const server = await rawServer((head, _, socket, count) => {
      if (head.startsWith("POST") && count === 2) socket.destroy();
      else socket.write(json(true));
    });
    const { client } = serviceClient(server.url);
    assert.equal(await client.domain("example.org"), true);
    await assert.rejects(client.authenticate("alice@example.org", "secret"), ServiceUnavailable);
    assert.equal(server.requests(), 2, "the sign-in reached the server once");
    // The pool carries on with a new connection.
    assert.equal(await client.domain("example.org"), true);
  });

  test("a server that closes every connection under the request: one more try, then ServiceUnavailable", async () => {
    const server = await rawServer((_, __, socket) => socket.destroy());
    const { client, metrics } = serviceClient(server.url);
    await assert.rejects(client.mailbox("alice@example.org"), ServiceUnavailable);
    assert.equal(server.requests(), 2);
    assert.equal(metrics.serviceRequests.get({ endpoint: "mailbox", outcome: "error" }), 1);
  });

  test("Connection: close and a body until close: answered, and the connection is not reused", async () => {
    const server = await rawServer((_, __, socket) => {
      socket.end('HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n["a@example.org"]');
    });
    const { client } = serviceClient(server.url);
    assert.deepEqual(await client.senders("a@example.org"), ["a@example.org"]);
    assert.deepEqual(await client.senders("a@example.org"), ["a@example.org"]);
    assert.equal(server.sockets.size, 2);
  });

  test("no answer within SERVICE_TIMEOUT: ServiceUnavailable, counted as a timeout", async () => {
    const silent = await rawServer(() => {});
    const { client, metrics } = serviceClient(silent.url, 300);
    const started = Date.now();
    await assert.rejects(client.domain("example.org"), ServiceUnavailable);
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 250 && elapsed < 2000, `failed after ${elapsed} ms`);
    assert.equal(metrics.serviceRequests.get({ endpoint: "domain", outcome: "timeout" }), 1);
  });

  test("an answer whose body stalls: ServiceUnavailable after SERVICE_TIMEOUT", async () => {
    const stalling = await rawServer((_, __, socket) => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n["a@exa');
    });
    const { client, metrics } = serviceClient(stalling.url, 300);
    const started = Date.now();
    await assert.rejects(client.alias("team@example.org"), ServiceUnavailable);
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 250 && elapsed < 2000, `failed after ${elapsed} ms`);
    assert.equal(metrics.serviceRequests.get({ endpoint: "alias", outcome: "timeout" }), 1);
  });

  test("an answer over 1 MiB is refused, Content-Length or chunked", async () => {
    const big = JSON.stringify(Array.from({ length: 60_000 }, (_, n) => `user${n}@example.org`));
    assert.ok(big.length > 1024 * 1024);
    const { url } = await httpServer((request, response) => {
      if (request.url?.includes("chunked")) {
        response.write(big.slice(0, 1000));
        response.end(big.slice(1000));
      } else {
        response.setHeader("content-length", Buffer.byteLength(big));
        response.end(big);
      }
    });
    const { client } = serviceClient(url);
    await assert.rejects(client.alias("team@example.org"), ServiceUnavailable);
    await assert.rejects(client.alias("chunked@example.org"), ServiceUnavailable);
  });

  test("garbage, or bytes after the answer: that request fails or the connection is dropped, the next works", async () => {
    const server = await rawServer((head, _, socket) => {
      if (head.includes("garbage")) socket.write("HTTP/9 what\r\n\r\n");
      else if (head.includes("extra"))
        socket.write(`${json(true)}HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2`);
      else socket.write(json(false));
    });
    const { client } = serviceClient(server.url);
    await assert.rejects(client.domain("garbage.example"), ServiceUnavailable);
    assert.equal(await client.domain("extra.example"), true);
    // Not "2", the bytes that followed the last answer: those were never taken for this one's.
    assert.equal(await client.domain("next.example"), false);
  });

  test("nothing listening: ServiceUnavailable at once", async () => {
    const gone = await listen(createServer());
    const port = portOf(gone);
    await new Promise((done) => gone.close(done));
    const { client, metrics } = serviceClient(`http://127.0.0.1:${port}`, 5000);
    const started = Date.now();
    await assert.rejects(client.smtpQuota("alice@example.org"), ServiceUnavailable);
    assert.ok(Date.now() - started < 1000);
    assert.equal(metrics.serviceRequests.get({ endpoint: "smtp_quota", outcome: "error" }), 1);
  });
});

describe("ServiceClient over TLS", () => {
  // A certificate for localhost, made here.
  const dir = mkdtempSync(join(tmpdir(), "adapter-client-tls-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const made = spawnSync(
    "openssl",
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"]
      .concat(["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"])
      .concat(["-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")]),
    { encoding: "utf8" },
  );

  test("https: the certificate is verified; once trusted, lookups and sign-ins go through TLS", async () => {
    assert.equal(made.status, 0, made.stderr);
    const cert = readFileSync(join(dir, "cert.pem"), "utf8");
    let secure = 0;
    const server = createHttpsServer(
      { key: readFileSync(join(dir, "key.pem")), cert },
      (request, response) => {
        if ((request.socket as { encrypted?: boolean }).encrypted) secure += 1;
        response.end(request.method === "POST" ? "{}" : "true");
      },
    );
    servers.push(server);
    await listen(server);
    const url = `https://localhost:${portOf(server)}`;

    const untrusting = serviceClient(url).client;
    await assert.rejects(untrusting.domain("example.org"), ServiceUnavailable);
    assert.equal(secure, 0);

    // What NODE_EXTRA_CA_CERTS does for the adapter process (see socketmap.test.ts), done here.
    const defaults = getCACertificates("default");
    setDefaultCACertificates([...defaults, cert]);
    try {
      const { client } = serviceClient(url);
      assert.equal(await client.domain("example.org"), true);
      assert.equal(await client.authenticate("alice@example.org", "secret"), "success");
      assert.equal(secure, 2);
    } finally {
      setDefaultCACertificates(defaults);
    }
  });
});
