/**
 * Requests that arrive in one event-loop turn, on every database: the per-message lookups and the
 * token check are read together (one statement per turn on PostgreSQL and MariaDB), and sign-ins
 * and admin writes run side by side. Each answer must be the one the request gets alone. On MariaDB
 * two sign-ins of one turn once failed with 500 (the batched user read was invalid SQL there).
 */
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { startService, type TestService } from "./helpers/service.ts";

const password = "correct horse battery staple";

interface RawRequest {
  method: string;
  path: string;
  token: string;
  json?: unknown;
}

describe("requests arriving in one turn", () => {
  let service: TestService;
  let tokens: Record<"mta" | "mailboxServer" | "admin", string>;

  before(async () => {
    service = await startService();
    tokens = {
      mta: await service.token("mta"),
      mailboxServer: await service.token("mailbox-server"),
      admin: await service.token("admin"),
    };
    const { domains, users, aliases, settings } = service.services;
    await domains.create("example.org");
    await domains.create("example.net");
    await settings.update({ smtp_quota_limit_per_hour: 50, postmaster_address: "alice@example.org" });
    for (const name of ["alice", "bob", "carol", "dave"])
      await users.create({ email: `${name}@example.org`, password, quota: 100 });
    await users.create({ email: "plain@example.org", password, mailCrypt: false });
    await aliases.create({
      source: "team@example.org",
      destinations: ["alice@example.org", "bob@example.org"],
    });
    await aliases.create({ source: "info@example.net", destinations: ["carol@example.org"] });
  });
  after(() => service.close());

  /** Writes every request on its own connection in one synchronous block: the server reads them in one turn. */
  async function inOneTurn(requests: RawRequest[]): Promise<{ status: number; body: string }[]> {
    const url = new URL(service.url);
    const sockets = requests.map(() => connect(Number(url.port), url.hostname));
    await Promise.all(sockets.map((socket) => new Promise((resolve) => socket.once("connect", resolve))));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const answers = sockets.map(readAnswer);
    for (const [i, socket] of sockets.entries()) {
      const { method, path, token, json } = requests[i] as RawRequest;
      const body = json === undefined ? "" : JSON.stringify(json);
      const head = [`${method} ${path} HTTP/1.1`, "Host: x", `Authorization: Bearer ${token}`];
      if (json !== undefined)
        head.push("Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`);
      socket.write(`${head.join("\r\n")}\r\n\r\n${body}`);
    }
    const texts = await Promise.all(answers);
    for (const socket of sockets) socket.destroy();
    return texts.map((text) => ({
      status: Number(text.slice(9, 12)),
      body: text.split("\r\n\r\n")[1] ?? "",
    }));
  }

  /** The same requests one after another, each alone in its turn. */
  async function oneByOne(requests: RawRequest[]): Promise<{ status: number; body: string }[]> {
    const answers = [];
    for (const request of requests) answers.push(...(await inOneTurn([request])));
    return answers;
  }

  test("every lookup and the token check, many keys in one turn, answer as they do alone", async () => {
    const get = (path: string, token = tokens.mta): RawRequest => ({ method: "GET", path, token });
    const requests = [
      ...["alice", "bob", "nobody", "Carol", "plain"].map((name) =>
        get(`/api/mta/mailbox/${name}@example.org`),
      ),
      ...["example.org", "example.net", "example.com", "EXAMPLE.org"].map((name) =>
        get(`/api/mta/domain/${name}`),
      ),
      ...[
        "team@example.org",
        "info@example.net",
        "none@example.org",
        "postmaster@example.org",
        "postmaster@example.net",
      ].map((address) => get(`/api/mta/alias/${address}`)),
      ...["alice@example.org", "team@example.org", "info@example.net", "nobody@example.org"].map((address) =>
        get(`/api/mta/senders/${address}`),
      ),
      ...["alice@example.org", "team@example.org", "nobody@example.org"].map((address) =>
        get(`/api/mta/smtp_quota/${address}`),
      ),
      ...["alice", "plain", "nobody", "dave"].map((name) =>
        get(`/api/mailbox-server/${name}@example.org`, tokens.mailboxServer),
      ),
      get("/api/mta/mailbox/alice@example.org", "0".repeat(64)),
      get("/api/mailbox-server/alice@example.org", tokens.mta),
    ];
    const together = await inOneTurn(requests);
    const alone = await oneByOne(requests);
    assert.deepEqual(together, alone);
    // And the answers are the right ones, not merely consistent.
    assert.deepEqual(
      together.slice(0, 5).map((answer) => answer.body),
      ["true", "true", "false", "true", "true"],
    );
    assert.deepEqual(
      together.slice(5, 9).map((answer) => answer.body),
      ["true", "true", "false", "true"],
    );
    assert.deepEqual(JSON.parse(together[9]?.body ?? ""), ["alice@example.org", "bob@example.org"]);
    assert.deepEqual(JSON.parse(together[12]?.body ?? ""), ["alice@example.org"]);
    assert.deepEqual(JSON.parse(together[15]?.body ?? ""), ["alice@example.org", "bob@example.org"]);
    assert.deepEqual(JSON.parse(together[18]?.body ?? ""), { per_hour: 50, per_day: 0 });
    assert.equal(together[20]?.status, 404);
    assert.equal(JSON.parse(together[21]?.body ?? "").body.mailCrypt, 2);
    assert.equal(together[23]?.status, 404);
    assert.deepEqual(
      together.slice(-2).map((answer) => answer.status),
      [401, 403],
    );
  });

  test("sign-ins arriving together each succeed (passdb and SMTP auth)", async () => {
    const passdb = (name: string): RawRequest => ({
      method: "POST",
      path: `/api/mailbox-server/${name}@example.org`,
      token: tokens.mailboxServer,
      json: { password },
    });
    const auth = (name: string): RawRequest => ({
      method: "POST",
      path: "/api/mta/auth",
      token: tokens.mta,
      json: { email: `${name}@example.org`, password },
    });
    const answers = await inOneTurn([
      passdb("alice"),
      passdb("bob"),
      passdb("alice"),
      auth("carol"),
      auth("dave"),
    ]);
    assert.deepEqual(
      answers.map((answer) => answer.status),
      [200, 200, 200, 200, 200],
      answers.map((answer) => answer.body).join("\n"),
    );
    assert.equal(JSON.parse(answers[0]?.body ?? "").body.mailCrypt, 2);
  });

  test("admin resets arriving together each succeed", async () => {
    const reset = (name: string): RawRequest => ({
      method: "POST",
      path: `/api/admin/users/${name}@example.org/reset`,
      token: tokens.admin,
      json: { password: `${password} new` },
    });
    const answers = await inOneTurn([reset("carol"), reset("dave")]);
    assert.deepEqual(
      answers.map((answer) => answer.status),
      [200, 200],
      answers.map((answer) => answer.body).join("\n"),
    );
  });
});

function readAnswer(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    socket.on("error", reject);
    socket.on("data", (chunk) => {
      text += chunk;
      const [head = "", body = ""] = text.split("\r\n\r\n");
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? -1);
      if (length >= 0 && Buffer.byteLength(body) >= length) resolve(text);
    });
  });
}
