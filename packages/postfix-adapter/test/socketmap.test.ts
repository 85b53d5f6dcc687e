/**
 * The socketmap server against the real service: every map, TEMP (never NOTFOUND) when the service
 * is away or failing, and bad input closing only the connection it came on.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createServer as createTlsServer } from "node:tls";
import { sql } from "kysely";
import {
  type Adapter,
  Connection,
  netstring,
  type Service,
  SocketmapClient,
  startAccounts,
  startAdapter,
  waitFor,
} from "./helpers.ts";

describe("socketmap", () => {
  let accounts: Service;
  let adapter: Adapter;
  let client: SocketmapClient;

  before(async () => {
    accounts = await startAccounts();
    adapter = await startAdapter({ SERVICE_URL: accounts.url, SERVICE_TOKEN: accounts.token });
    client = await SocketmapClient.open(adapter.ports.socketmap);
  });
  after(async () => {
    client?.close();
    await adapter?.stop();
    await accounts?.close();
  });

  test("domain: OK for a managed domain, NOTFOUND otherwise", async () => {
    assert.equal(await client.query("domain", "example.org"), "OK 1");
    assert.equal(await client.query("domain", "EXAMPLE.ORG"), "OK 1");
    assert.equal(await client.query("domain", "example.net"), "NOTFOUND ");
    // Not a domain name at all: the service says 400, which is "no such domain" here.
    assert.equal(await client.query("domain", "no domain"), "NOTFOUND ");
  });

  test("mailbox: OK for an active user, NOTFOUND for aliases and strangers", async () => {
    assert.equal(await client.query("mailbox", "alice@example.org"), "OK 1");
    assert.equal(await client.query("mailbox", "Alice@Example.org"), "OK 1");
    assert.equal(await client.query("mailbox", "team@example.org"), "NOTFOUND ");
    assert.equal(await client.query("mailbox", "nobody@example.org"), "NOTFOUND ");
    assert.equal(await client.query("mailbox", "alice"), "NOTFOUND ");
  });

  test("alias: destinations comma-separated", async () => {
    assert.equal(await client.query("alias", "team@example.org"), "OK alice@example.org,bob@example.org");
    assert.equal(await client.query("alias", "info@example.org"), "OK alice@example.org");
    assert.equal(await client.query("alias", "alice@example.org"), "NOTFOUND ");
    assert.equal(await client.query("alias", "nobody@example.org"), "NOTFOUND ");
  });

  test("senders: the logins that may send as an address", async () => {
    assert.equal(await client.query("senders", "alice@example.org"), "OK alice@example.org");
    assert.equal(await client.query("senders", "info@example.org"), "OK alice@example.org");
    assert.equal(await client.query("senders", "team@example.org"), "OK alice@example.org,bob@example.org");
    assert.equal(await client.query("senders", "stranger@example.net"), "NOTFOUND ");
  });

  test("keys reach the service percent-encoded, whatever they hold", async () => {
    for (const key of [
      "a/b@example.org",
      "a?b@example.org",
      "a#b@example.org",
      "%2e%2e",
      "..",
      "a b@example.org",
    ]) {
      assert.equal(await client.query("mailbox", key), "NOTFOUND ", key);
    }
    assert.equal(await client.query("mailbox", ""), "NOTFOUND ");
    assert.equal(await client.query("alias", "ünïcødé@example.org"), "NOTFOUND ");
  });

  test("one connection, many requests; requests sent ahead are answered in order", async () => {
    const connection = await Connection.open(adapter.ports.socketmap);
    const queries = [
      "domain example.org",
      "mailbox bob@example.org",
      "alias team@example.org",
      "domain nope.example",
    ];
    connection.write(Buffer.concat(queries.map(netstring)));
    const pipelined = new SocketmapClient(connection);
    assert.deepEqual(
      [await pipelined.reply(), await pipelined.reply(), await pipelined.reply(), await pipelined.reply()],
      ["OK 1", "OK 1", "OK alice@example.org,bob@example.org", "NOTFOUND "],
    );
    // A request split over many writes, a byte at a time.
    for (const byte of netstring("mailbox alice@example.org")) {
      connection.write(Buffer.from([byte]));
    }
    assert.equal(await pipelined.reply(), "OK 1");
    connection.close();
  });

  test("unknown map or a request without a key: PERM, and the connection stays usable", async () => {
    assert.equal(
      await client.query("virtual", "alice@example.org"),
      "PERM unknown map (use domain, mailbox, alias, senders)",
    );
    client.connection.write(netstring("domain"));
    assert.equal(await client.reply(), "PERM malformed request (expected: <map> <key>)");
    assert.equal(await client.query("domain", "example.org"), "OK 1");
  });

  for (const [name, bytes, reply] of [
    ["a length that is not digits", "x5:hello,", "PERM malformed netstring length"],
    ["a missing comma", "5:helloX", "PERM malformed netstring (no comma after payload)"],
    ["a leading zero", "05:hello,", "PERM malformed netstring length (leading zero)"],
    ["an empty length", ":hello,", "PERM malformed netstring length (empty)"],
    ["an oversized request (by its length alone)", "10001:", "PERM request longer than 10000 bytes"],
    ["a length with too many digits", "99999999999999999999", "PERM request longer than 10000 bytes"],
  ] as const) {
    test(`bad input (${name}): PERM, that connection closes, the others keep working`, async () => {
      const bad = await Connection.open(adapter.ports.socketmap);
      bad.write(bytes);
      const answer = await new SocketmapClient(bad).reply();
      assert.equal(answer, reply);
      assert.equal(await bad.closedWithin(2000), true, "the server closes the bad connection");
      assert.equal(await client.query("domain", "example.org"), "OK 1");
    });
  }

  test("an oversized request sent whole is refused before the service is asked", async () => {
    const bad = await Connection.open(adapter.ports.socketmap);
    bad.write(netstring(`mailbox ${"a".repeat(20_000)}@example.org`));
    assert.equal(await new SocketmapClient(bad).reply(), "PERM request longer than 10000 bytes");
    assert.equal(await bad.closedWithin(2000), true);
    // The longest request accepted still gets an answer.
    const key = `${"a".repeat(10_000 - "mailbox ".length - "@example.org".length)}@example.org`;
    assert.equal(await client.query("mailbox", key), "NOTFOUND ");
  });

  test("the service answers 5xx: TEMP, never NOTFOUND", async () => {
    const { db } = accounts.service.services.database;
    await sql`ALTER TABLE aliases RENAME TO aliases_away`.execute(db);
    try {
      assert.match(await client.query("alias", "team@example.org"), /^TEMP /);
    } finally {
      await sql`ALTER TABLE aliases_away RENAME TO aliases`.execute(db);
    }
    assert.equal(await client.query("alias", "team@example.org"), "OK alice@example.org,bob@example.org");
  });

  test("the service is unreachable: TEMP for every map, and lookups work again once it is back", async () => {
    await accounts.proxy.stop();
    try {
      for (const [map, key] of [
        ["domain", "example.org"],
        ["mailbox", "alice@example.org"],
        ["alias", "team@example.org"],
        ["senders", "nobody@example.org"],
      ]) {
        assert.equal(
          await client.query(map as string, key as string),
          "TEMP account service unavailable",
          map,
        );
      }
      await adapter.waitForLog("the outage in the log", (line) =>
        line.msg.startsWith("account service unavailable"),
      );
    } finally {
      await accounts.proxy.start();
    }
    await waitFor(
      "lookups to work again",
      async () => (await client.query("domain", "example.org")) === "OK 1",
    );
    await adapter.waitForLog(
      "the recovery in the log",
      (line) => line.msg === "account service reachable again",
    );
  });

  test("a wrong token: TEMP (a configuration problem must not bounce mail)", async () => {
    const wrong = await startAdapter({ SERVICE_URL: accounts.url, SERVICE_TOKEN: "0".repeat(64) });
    try {
      const other = await SocketmapClient.open(wrong.ports.socketmap);
      assert.equal(await other.query("mailbox", "alice@example.org"), "TEMP account service unavailable");
      other.close();
      const line = await wrong.waitForLog("the token problem", (l) =>
        l.msg.startsWith("account service unavailable"),
      );
      assert.match(String(line["err"]), /refused SERVICE_TOKEN/);
    } finally {
      await wrong.stop();
    }
  });

  test("SERVICE_URL over https: lookups through TLS (a reverse proxy in front of the service)", async () => {
    // A certificate for localhost, made here, trusted by the adapter through NODE_EXTRA_CA_CERTS.
    const dir = mkdtempSync(join(tmpdir(), "adapter-tls-"));
    const made = spawnSync(
      "openssl",
      ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"]
        .concat(["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"])
        .concat(["-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")]),
      { encoding: "utf8" },
    );
    assert.equal(made.status, 0, made.stderr);
    const terminator = createTlsServer(
      { key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")) },
      (client) => {
        const upstream = connect({ host: "127.0.0.1", port: accounts.proxy.port });
        client.on("error", () => upstream.destroy());
        upstream.on("error", () => client.destroy());
        client.pipe(upstream).pipe(client);
      },
    );
    await new Promise<void>((done) => terminator.listen(0, "127.0.0.1", () => done()));
    const port = (terminator.address() as { port: number }).port;
    const secure = await startAdapter({
      SERVICE_URL: `https://localhost:${port}`,
      SERVICE_TOKEN: accounts.token,
      NODE_EXTRA_CA_CERTS: join(dir, "cert.pem"),
    });
    try {
      const other = await SocketmapClient.open(secure.ports.socketmap);
      assert.equal(await other.query("alias", "team@example.org"), "OK alice@example.org,bob@example.org");
      assert.equal(await other.query("domain", "example.net"), "NOTFOUND ");
      other.close();
    } finally {
      await secure.stop();
      terminator.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a service that does not answer in time: TEMP after SERVICE_TIMEOUT", async () => {
    // A listener that accepts and never answers stands for a hung service.
    const { createServer } = await import("node:net");
    const silent = createServer(() => {});
    await new Promise<void>((done) => silent.listen(0, "127.0.0.1", () => done()));
    const port = (silent.address() as { port: number }).port;
    const slow = await startAdapter({
      SERVICE_URL: `http://127.0.0.1:${port}`,
      SERVICE_TOKEN: "x",
      SERVICE_TIMEOUT: "300ms",
    });
    try {
      const other = await SocketmapClient.open(slow.ports.socketmap);
      const started = Date.now();
      assert.equal(await other.query("domain", "example.org"), "TEMP account service unavailable");
      const elapsed = Date.now() - started;
      assert.ok(elapsed >= 250 && elapsed < 5000, `answered after ${elapsed} ms`);
      other.close();
    } finally {
      await slow.stop();
      silent.close();
    }
  });
});
