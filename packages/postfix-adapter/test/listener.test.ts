/**
 * What the three protocol servers share (tcp.ts), on a socketmap listener made in this process:
 * a connection without traffic is closed after the idle time, one with traffic is not, and the
 * connection count goes back to zero.
 */
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { after, describe, test } from "node:test";
import { createLogger } from "../src/logger.ts";
import { Metrics } from "../src/metrics.ts";
import { ServiceClient } from "../src/service-client.ts";
import { createSocketmapListener } from "../src/socketmap.ts";

describe("listener idle connections", () => {
  const metrics = new Metrics();
  const logger = createLogger("error", { write: () => {} });
  // Nothing listens there: every lookup answers TEMP, which is traffic all the same.
  const client = new ServiceClient({
    baseUrl: "http://127.0.0.1:9",
    token: "t",
    timeoutMs: 500,
    logger,
    metrics,
  });
  const listener = createSocketmapListener({ client, logger, metrics, idleTimeoutMs: 300 });
  after(async () => {
    await listener.close(100);
    await client.close();
  });

  const open = async (port: number) => {
    const socket = connect({ host: "127.0.0.1", port });
    await new Promise((done) => socket.once("connect", done));
    const closed = new Promise<number>((done) => socket.once("close", () => done(Date.now())));
    return { socket, closed };
  };
  const ask = (socket: Socket, text: string) =>
    new Promise<string>((done) => {
      socket.once("data", (chunk) => done(chunk.toString()));
      socket.write(`${Buffer.byteLength(text)}:${text},`);
    });

  test("a quiet connection is closed after the idle time; a busy one stays", async () => {
    const { port } = await listener.listen({ host: "127.0.0.1", port: 0 });
    const quiet = await open(port);
    const busy = await open(port);
    const started = Date.now();
    assert.equal(metrics.connections.get({ listener: "socketmap" }), 2);
    // The busy one asks every 100 ms for 900 ms: three idle times.
    let lastAsked = started;
    while (Date.now() - started < 900) {
      assert.match(await ask(busy.socket, "domain example.org"), /^\d+:TEMP /);
      lastAsked = Date.now();
      await new Promise((done) => setTimeout(done, 100));
    }
    const quietFor = (await quiet.closed) - started;
    assert.ok(quietFor >= 250 && quietFor < 800, `the quiet connection closed after ${quietFor} ms`);
    assert.equal(busy.socket.destroyed, false, "the busy connection is still open");
    const busyQuietFor = (await busy.closed) - lastAsked;
    assert.ok(busyQuietFor >= 300, `the busy one closed ${busyQuietFor} ms after its last lookup`);
    // The server's side of the last connection closes a moment after the client's.
    for (
      let waited = 0;
      metrics.connections.get({ listener: "socketmap" }) !== 0 && waited < 1000;
      waited += 10
    ) {
      await new Promise((done) => setTimeout(done, 10));
    }
    assert.equal(metrics.connections.get({ listener: "socketmap" }), 0);
  });
});
