import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { loadConfig } from "../src/config.ts";
import { scratchDatabase } from "./helpers/databases.ts";
import { type RunningService, startServiceProcess } from "./helpers/process.ts";

/**
 * Slow clients against the service as `npm start` runs it, with its timeouts set low through the
 * settings (REQUEST_TIMEOUT, CONNECTION_TIMEOUT) so each case takes seconds, not minutes.
 */
const requestTimeout = 3;
const connectionTimeout = 2;

/** A raw connection: what was received, and when (ms after opening) it closed. */
interface RawConnection {
  socket: Socket;
  received: () => string;
  closed: Promise<number>;
}

function open(url: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let data = "";
    const socket = connect(Number(port), hostname);
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      data += chunk;
    });
    socket.on("error", () => {});
    const closed = new Promise<number>((done) => socket.on("close", () => done(Date.now() - started)));
    socket.once("connect", () => resolve({ socket, received: () => data, closed }));
    socket.once("error", reject);
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("slow clients", () => {
  let service: RunningService;
  let remove: () => Promise<void>;

  before(async () => {
    const scratch = await scratchDatabase("mas-slow-");
    remove = scratch.remove;
    service = await startServiceProcess({
      DATABASE_URL: scratch.url,
      REQUEST_TIMEOUT: String(requestTimeout),
      CONNECTION_TIMEOUT: String(connectionTimeout),
      LOG_LEVEL: "silent",
    });
  });
  after(async () => {
    await service?.stop("SIGKILL");
    await remove?.();
  });

  test("the defaults cut a request still arriving after 60 s within 90 s", () => {
    const defaults = loadConfig({});
    assert.equal(defaults.requestTimeout, 60);
    // Node checks every quarter of the request timeout: the cut comes at most 1.25 x later.
    assert.ok(defaults.requestTimeout * 1.25 <= 90);
    assert.equal(defaults.connectionTimeout, 120);
  });

  test("a body sent one byte a second is cut once the request took longer than REQUEST_TIMEOUT", async () => {
    const connection = await open(service.url);
    connection.socket.write(
      "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n",
    );
    let sent = 0;
    let closedAt: number | null = null;
    void connection.closed.then((at) => (closedAt = at));
    // Bounded: at most 15 bytes over 15 s; never silent long enough for CONNECTION_TIMEOUT.
    while (closedAt === null && sent < 15) {
      connection.socket.write("e");
      sent++;
      await sleep(1000);
    }
    const at = await connection.closed;
    assert.ok(at < requestTimeout * 1250 + 1500, `cut after ${at} ms`);
    assert.ok(at >= requestTimeout * 1000 - 200, `not before the timeout: ${at} ms`);
    assert.ok(sent < 10, `${sent} bytes were sent before the cut`);
    const answer = connection.received();
    if (answer !== "") assert.match(answer, /^HTTP\/1\.1 408 /);
  });

  test("a connection silent during its request is cut after CONNECTION_TIMEOUT", async () => {
    const connection = await open(service.url);
    connection.socket.write(
      "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ne",
    );
    const at = await Promise.race([connection.closed, sleep(10_000).then(() => Number.POSITIVE_INFINITY)]);
    connection.socket.destroy();
    assert.ok(at < connectionTimeout * 1000 + 1500, `cut after ${at} ms`);
  });

  test("an idle keep-alive connection between requests is not cut (Dovecot and Postfix keep theirs)", async () => {
    const connection = await open(service.url);
    const ask = async () => {
      const before = connection.received().length;
      connection.socket.write("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
      const deadline = Date.now() + 5000;
      while (!/\r\n\r\n[\s\S]*\}$/.test(connection.received().slice(before)) && Date.now() < deadline)
        await sleep(20);
      return connection.received().slice(before);
    };
    try {
      assert.match(await ask(), /^HTTP\/1\.1 200 /);
      // Idle for longer than both timeouts and Node's check interval.
      await sleep(requestTimeout * 1250 + 1500);
      assert.equal(connection.socket.destroyed, false, "the idle connection is still open");
      assert.match(await ask(), /^HTTP\/1\.1 200 /);
    } finally {
      connection.socket.destroy();
    }
  });
});
