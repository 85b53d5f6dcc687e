/**
 * The Dovecot-protocol SASL server against the real service, spoken as Postfix's smtpd speaks it
 * (xsasl_dovecot_server.c): handshake, PLAIN and LOGIN with and without initial responses, the
 * refusals, failing closed when the service is away, and bad input.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  type Adapter,
  b64,
  password,
  SaslClient,
  type Service,
  startAccounts,
  startAdapter,
} from "./helpers.ts";

// Each AUTH comes from an address of its own: the service throttles an address after five failed
// sign-ins (section 3 of issue 21), and these tests fail on purpose more often than that.
let clients = 0;
const auth = (id: number, mechanism: string, ...extra: string[]) =>
  [
    "AUTH",
    String(id),
    mechanism,
    "service=smtp",
    "nologin",
    "lip=192.0.2.1",
    `rip=198.51.100.${(clients++ % 250) + 1}`,
    "secured",
    ...extra,
  ].join("\t");
const plain = (login: string, secret: string, authzid = "") =>
  `resp=${b64(`${authzid}\0${login}\0${secret}`)}`;

describe("SASL (Dovecot authentication protocol)", () => {
  let accounts: Service;
  let adapter: Adapter;
  let client: SaslClient;

  before(async () => {
    accounts = await startAccounts();
    adapter = await startAdapter({ SERVICE_URL: accounts.url, SERVICE_TOKEN: accounts.token });
    client = await SaslClient.open(adapter.ports.sasl);
  });
  after(async () => {
    client?.close();
    await adapter?.stop();
    await accounts?.close();
  });

  test("the server's handshake: version 1, PLAIN and LOGIN as plaintext mechanisms, DONE", () => {
    const [version, mechPlain, mechLogin, spid, cuid, cookie, done] = client.handshake;
    assert.equal(version, "VERSION\t1\t2");
    assert.equal(mechPlain, "MECH\tPLAIN\tplaintext");
    assert.equal(mechLogin, "MECH\tLOGIN\tplaintext");
    assert.match(spid ?? "", /^SPID\t\d+$/);
    assert.match(cuid ?? "", /^CUID\t\d+$/);
    assert.match(cookie ?? "", /^COOKIE\t[0-9a-f]{32}$/);
    assert.equal(done, "DONE");
    assert.equal(client.handshake.length, 7);
  });

  test("PLAIN with an initial response: OK with the login as user=", async () => {
    client.send(auth(1, "PLAIN", plain("alice@example.org", password)));
    assert.equal(await client.line(), "OK\t1\tuser=alice@example.org");
    // The login as the service stores it, whatever case the client typed.
    client.send(auth(2, "plain", plain("Alice@EXAMPLE.org", password, "Alice@EXAMPLE.org")));
    assert.equal(await client.line(), "OK\t2\tuser=alice@example.org");
  });

  test("PLAIN without an initial response: an empty challenge, then the response", async () => {
    client.send(auth(3, "PLAIN"));
    assert.equal(await client.line(), "CONT\t3\t");
    client.send(`CONT\t3\t${b64(`\0bob@example.org\0${password}`)}`);
    assert.equal(await client.line(), "OK\t3\tuser=bob@example.org");
  });

  test("LOGIN: user name and password challenges", async () => {
    client.send(auth(4, "LOGIN"));
    assert.equal(await client.line(), `CONT\t4\t${b64("Username:")}`);
    client.send(`CONT\t4\t${b64("bob@example.org")}`);
    assert.equal(await client.line(), `CONT\t4\t${b64("Password:")}`);
    client.send(`CONT\t4\t${b64(password)}`);
    assert.equal(await client.line(), "OK\t4\tuser=bob@example.org");
  });

  test("LOGIN with the user name as initial response (AUTH LOGIN <base64>)", async () => {
    client.send(auth(5, "LOGIN", `resp=${b64("alice@example.org")}`));
    assert.equal(await client.line(), `CONT\t5\t${b64("Password:")}`);
    client.send(`CONT\t5\t${b64("wrong password")}`);
    assert.equal(await client.line(), "FAIL\t5\tuser=alice@example.org\treason=Authentication failed");
  });

  test("refusals: wrong password, unknown user, spam-flagged, password change required", async () => {
    client.send(auth(6, "PLAIN", plain("alice@example.org", "not the password")));
    assert.equal(await client.line(), "FAIL\t6\tuser=alice@example.org\treason=Authentication failed");
    client.send(auth(7, "PLAIN", plain("nobody@example.org", password)));
    assert.equal(await client.line(), "FAIL\t7\tuser=nobody@example.org\treason=Authentication failed");
    client.send(auth(8, "PLAIN", plain("spam@example.org", password)));
    assert.equal(
      await client.line(),
      "FAIL\t8\tuser=spam@example.org\tcode=user_disabled\treason=Account disabled",
    );
    // The spam flag is only told to someone who knows the password.
    client.send(auth(9, "PLAIN", plain("spam@example.org", "not the password")));
    assert.equal(await client.line(), "FAIL\t9\tuser=spam@example.org\treason=Authentication failed");
    client.send(auth(10, "LOGIN", `resp=${b64("change@example.org")}`));
    await client.line();
    client.send(`CONT\t10\t${b64(password)}`);
    assert.equal(
      await client.line(),
      "FAIL\t10\tuser=change@example.org\tcode=pass_expired\treason=Password change required",
    );
  });

  test("several authentications at once on one connection, answered by id", async () => {
    client.send(auth(11, "PLAIN", plain("alice@example.org", password)));
    client.send(auth(12, "PLAIN", plain("bob@example.org", "wrong")));
    client.send(auth(13, "LOGIN"));
    const lines = [await client.line(), await client.line(), await client.line()].sort();
    assert.deepEqual(lines, [
      `CONT\t13\t${b64("Username:")}`,
      "FAIL\t12\tuser=bob@example.org\treason=Authentication failed",
      "OK\t11\tuser=alice@example.org",
    ]);
  });

  test("the client's address goes to the service as X-Client-Address; the password is never logged", async () => {
    accounts.proxy.sent = "";
    client.send(
      ["AUTH", "14", "PLAIN", "service=smtp", "rip=192.0.2.7", plain("bob@example.org", password)].join("\t"),
    );
    assert.equal(await client.line(), "OK\t14\tuser=bob@example.org");
    assert.match(accounts.proxy.sent, /^POST \/api\/mta\/auth HTTP\/1\.1\r\n/m);
    assert.match(accounts.proxy.sent, /^x-client-address: 192\.0\.2\.7\r$/im);
    // Something that is not an IP address is not passed on.
    accounts.proxy.sent = "";
    client.send(
      ["AUTH", "15", "PLAIN", "service=smtp", "rip=not-an-address", plain("bob@example.org", password)].join(
        "\t",
      ),
    );
    assert.equal(await client.line(), "OK\t15\tuser=bob@example.org");
    assert.doesNotMatch(accounts.proxy.sent, /x-client-address/i);
    assert.equal(adapter.output().includes(password), false, "the password appears in the adapter's output");
    assert.equal(adapter.output().includes("not the password"), false);
  });

  test("bad requests inside well-formed lines: FAIL, and the connection stays", async () => {
    client.send(auth(20, "CRAM-MD5"));
    assert.equal(await client.line(), "FAIL\t20\treason=Unsupported authentication mechanism");
    client.send(auth(21, "PLAIN", "resp=not*base64"));
    assert.equal(await client.line(), "FAIL\t21\treason=Invalid base64 data");
    client.send(auth(22, "PLAIN", `resp=${b64("only-one-part")}`));
    assert.equal(await client.line(), "FAIL\t22\treason=Invalid PLAIN data");
    // Signing in as somebody else (a master user's authzid) is not offered.
    client.send(auth(23, "PLAIN", plain("alice@example.org", password, "bob@example.org")));
    assert.equal(await client.line(), "FAIL\t23\treason=Authentication failed");
    client.send(auth(24, "PLAIN", plain("alice@example.org", "")));
    assert.equal(await client.line(), "FAIL\t24\treason=Authentication failed");
    client.send(auth(25, "PLAIN", plain("evil\tuser@example.org", password)));
    assert.equal(await client.line(), "FAIL\t25\treason=Authentication failed");
    client.send(`CONT\t999\t${b64("x")}`);
    assert.equal(await client.line(), "FAIL\t999\treason=Authentication request timed out");
    // resp= is the last parameter: what follows it is ignored.
    client.send(`${auth(26, "PLAIN", plain("alice@example.org", password))}\trip=203.0.113.9`);
    assert.equal(await client.line(), "OK\t26\tuser=alice@example.org");
  });

  for (const [name, lines] of [
    ["garbage instead of the handshake", ["GET / HTTP/1.1", "Host: x"]],
    ["a protocol version we do not speak", ["VERSION\t2\t0", "CPID\t1"]],
    ["AUTH before CPID", ["VERSION\t1\t0", auth(1, "PLAIN", plain("alice@example.org", password))]],
    ["an unknown command", ["VERSION\t1\t0", "CPID\t1", "HELLO\tworld"]],
    ["AUTH without service=", ["VERSION\t1\t0", "CPID\t1", "AUTH\t1\tPLAIN\trip=192.0.2.7"]],
    ["AUTH with a non-numeric id", ["VERSION\t1\t0", "CPID\t1", "AUTH\tx\tPLAIN\tservice=smtp"]],
    ["a reused request id", ["VERSION\t1\t0", "CPID\t1", auth(1, "LOGIN"), auth(1, "LOGIN")]],
    ["binary garbage", ["VERSION\t1\t0", "CPID\t1", "\u0000\u00ff\u0001"]],
  ] as const) {
    test(`bad input (${name}): that connection closes, the others keep working`, async () => {
      const bad = await SaslClient.open(adapter.ports.sasl, { handshake: false });
      bad.connection.write(`${lines.join("\n")}\n`);
      assert.equal(await bad.connection.closedWithin(3000), true, "the server closes the connection");
      client.send(auth(100, "PLAIN", plain("bob@example.org", password)));
      assert.equal(await client.line(), "OK\t100\tuser=bob@example.org");
    });
  }

  test("bad input (a line over 16 KiB): that connection closes", async () => {
    const bad = await SaslClient.open(adapter.ports.sasl);
    bad.connection.write(`AUTH\t1\tPLAIN\tservice=smtp\tresp=${"A".repeat(20_000)}`);
    assert.equal(await bad.connection.closedWithin(3000), true);
    const line = await adapter.waitForLog("the bad input in the log", (l) =>
      String(l["err"]).includes("over 16384"),
    );
    assert.equal(line.level, "warn");
  });

  test("the service unreachable: FAIL with the temp flag (fails closed), then sign-ins work again", async () => {
    await accounts.proxy.stop();
    try {
      client.send(auth(30, "PLAIN", plain("alice@example.org", password)));
      assert.equal(
        await client.line(),
        "FAIL\t30\tuser=alice@example.org\ttemp\treason=Temporary authentication failure, try again later",
      );
    } finally {
      await accounts.proxy.start();
    }
    client.send(auth(31, "PLAIN", plain("alice@example.org", password)));
    assert.equal(await client.line(), "OK\t31\tuser=alice@example.org");
  });

  test("the SASL connection is not closed when idle (Postfix keeps it for the life of smtpd)", async () => {
    // Idle timeouts apply to the other listeners; here a reused connection must still answer.
    const idle = await SaslClient.open(adapter.ports.sasl);
    assert.equal(await idle.connection.closedWithin(500), false);
    idle.send(auth(1, "PLAIN", plain("bob@example.org", password)));
    assert.equal(await idle.line(), "OK\t1\tuser=bob@example.org");
    idle.close();
  });
});
