import assert from "node:assert/strict";
import type { IncomingMessage, ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { maxHeldResponses } from "../src/http/integration/response-groups.ts";
import { startService, type TestService } from "./helpers/service.ts";

/**
 * Requests that arrive in one event-loop turn are all handled before any of their responses is
 * written, up to `maxHeldResponses` at a time (http/response-groups.ts). The client sockets live in
 * the test's own process: the requests are written in one synchronous block, so the server reads
 * them all in its next turn.
 */
describe("responses are written in groups", () => {
  let service: TestService;
  let token: string;
  const events: string[] = [];

  before(async () => {
    service = await startService();
    token = await service.token("mta");
    await service.services.domains.create("example.org");
    await service.services.users.create({
      email: "user@example.org",
      password: "correct horse battery staple",
      mailCrypt: false,
    });
    // What the server does, in order: each request as it is read, each response as it is written.
    service.app.server.prependListener("request", (request: IncomingMessage, response: ServerResponse) => {
      events.push(`read ${request.url}`);
      const end = response.end.bind(response) as (...args: unknown[]) => ServerResponse;
      (response as { end: unknown }).end = (...args: unknown[]) => {
        events.push(`write ${request.url}`);
        return end(...args);
      };
    });
  });
  after(() => service.close());

  const open = async (count: number): Promise<Socket[]> => {
    const url = new URL(service.url);
    const sockets = Array.from({ length: count }, () => connect(Number(url.port), url.hostname));
    await Promise.all(sockets.map((socket) => new Promise((resolve) => socket.once("connect", resolve))));
    // Let the server accept them, so that the requests are its only news in the next turn.
    await new Promise((resolve) => setTimeout(resolve, 50));
    return sockets;
  };
  const answer = (socket: Socket) =>
    new Promise<string>((resolve) => {
      let text = "";
      socket.on("data", (chunk) => {
        text += chunk;
        const [head = "", body = ""] = text.split("\r\n\r\n");
        const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? -1);
        if (length >= 0 && Buffer.byteLength(body) >= length) resolve(text);
      });
    });

  /** Sends one request on each socket in one synchronous block; gives the server's events and the answers. */
  const inOneTurn = async (paths: string[]) => {
    const sockets = await open(paths.length);
    events.length = 0;
    const answers = sockets.map(answer);
    for (const [i, socket] of sockets.entries())
      socket.write(`GET ${paths[i]} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`);
    const texts = await Promise.all(answers);
    for (const socket of sockets) socket.destroy();
    return {
      events: [...events],
      statuses: texts.map((text) => Number(text.slice(9, 12))),
      bodies: texts.map((text) => text.split("\r\n\r\n")[1]),
    };
  };
  const reads = (paths: string[]) => paths.map((path) => `read ${path}`);
  /** The writes of a group may come in any order: sorted. */
  const writes = (paths: string[]) => paths.map((path) => `write ${path}`).sort();
  const inGroups = (events: string[], sizes: number[]) => {
    const groups: string[] = [];
    let at = 0;
    for (const size of sizes) {
      groups.push(...events.slice(at, at + size), ...events.slice(at + size, at + 2 * size).sort());
      at += 2 * size;
    }
    return groups;
  };

  test("integration API answers without a lookup (400)", async () => {
    const paths = ["/api/mta/mailbox/a", "/api/mta/mailbox/b", "/api/mta/mailbox/c"];
    const result = await inOneTurn(paths);
    assert.deepEqual(
      inGroups(result.events, [3]),
      [...reads(paths), ...writes(paths)],
      "every request of the turn is read and handled before the first response is written",
    );
    assert.deepEqual(result.statuses, [400, 400, 400]);
  });

  test("only the integration API writes in groups: other answers leave as they are made", async () => {
    const paths = ["/nothing/a", "/nothing/b", "/nothing/c"];
    const result = await inOneTurn(paths);
    assert.deepEqual(
      result.events,
      paths.flatMap((path) => [`read ${path}`, `write ${path}`]),
    );
    assert.deepEqual(result.statuses, [404, 404, 404]);
  });

  test("lookups", async () => {
    const paths = [
      "/api/mta/mailbox/user@example.org",
      "/api/mta/domain/example.org",
      "/api/mta/mailbox/x@y.z",
    ];
    const result = await inOneTurn(paths);
    // On PostgreSQL and MariaDB the domain and mailbox reads are separate statements: their
    // answers may come back in either order, but none is written before the last request is read.
    assert.deepEqual(inGroups(result.events, [3]), [...reads(paths), ...writes(paths)]);
    assert.deepEqual(result.statuses, [200, 200, 200]);
    assert.deepEqual(result.bodies, ["true", "true", "false"]);
  });

  test(`at most ${maxHeldResponses} responses wait: a longer turn writes them as they fill a group`, async () => {
    const paths = Array.from({ length: maxHeldResponses + 2 }, (_, i) => `/api/mta/mailbox/${i}`);
    const [group, rest] = [paths.slice(0, maxHeldResponses), paths.slice(maxHeldResponses)];
    const result = await inOneTurn(paths);
    if (service.services.database.dialect === "sqlite") {
      // Each request is answered in the callback that read it: a group fills while the turn goes on.
      assert.deepEqual(inGroups(result.events, [group.length, rest.length]), [
        ...reads(group),
        ...writes(group),
        ...reads(rest),
        ...writes(rest),
      ]);
    } else {
      // The token check waits for the database: every request is read first, then the answers
      // leave in a full group and the rest.
      const [read, first, second] = [
        result.events.slice(0, paths.length),
        result.events.slice(paths.length, paths.length + group.length).sort(),
        result.events.slice(paths.length + group.length).sort(),
      ];
      assert.deepEqual([...read, ...first, ...second], [...reads(paths), ...writes(group), ...writes(rest)]);
    }
    assert.ok(result.statuses.every((status) => status === 400));
  });
});
