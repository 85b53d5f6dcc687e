/**
 * The policy server against the real service: the sending quota in memory and in Redis (two
 * adapter processes sharing one Redis), failing open, and bad input.
 */
import assert from "node:assert/strict";
import { connect, createServer } from "node:net";
import { after, before, describe, test } from "node:test";
import { Redis } from "ioredis";
import {
  type Adapter,
  Connection,
  PolicyClient,
  password,
  policyRequest,
  type Service,
  startAccounts,
  startAdapter,
} from "./helpers.ts";

const DEFER_HOUR = (n: number) =>
  `action=DEFER_IF_PERMIT 4.7.1 Sending quota exceeded (at most ${n} messages per hour), try again later`;
const DEFER_DAY = (n: number) =>
  `action=DEFER_IF_PERMIT 4.7.1 Sending quota exceeded (at most ${n} messages per day), try again later`;
const MALFORMED = "action=DEFER_IF_PERMIT 4.3.5 Malformed policy request";

const rcpt = (user: string) => ({ sasl_username: user, protocol_state: "RCPT", sender: user });
const endOfMessage = (user: string) => ({
  sasl_username: user,
  protocol_state: "END-OF-MESSAGE",
  sender: user,
  recipient: "",
  recipient_count: "1",
  queue_id: "4XyZ1234",
  size: "1234",
});

describe("policy, counters in memory", () => {
  let accounts: Service;
  let adapter: Adapter;
  let client: PolicyClient;

  before(async () => {
    accounts = await startAccounts();
    await accounts.service.services.users.create({
      email: "daily@example.org",
      password,
      mailCrypt: false,
      smtpQuota: { per_day: 2 },
    });
    adapter = await startAdapter({ SERVICE_URL: accounts.url, SERVICE_TOKEN: accounts.token });
    client = await PolicyClient.open(adapter.ports.policy);
  });
  after(async () => {
    client?.close();
    await adapter?.stop();
    await accounts?.close();
  });

  test("no sasl_username (unauthenticated, e.g. incoming mail): DUNNO", async () => {
    assert.equal(await client.ask({ sasl_username: "" }), "action=DUNNO");
    assert.equal(await client.ask({ sasl_username: "", protocol_state: "END-OF-MESSAGE" }), "action=DUNNO");
  });

  test("per_hour 3: three messages pass, the fourth is deferred at RCPT and at END-OF-MESSAGE", async () => {
    for (let i = 1; i <= 3; i++) {
      assert.equal(await client.ask(rcpt("alice@example.org")), "action=DUNNO", `RCPT of message ${i}`);
      assert.equal(
        await client.ask(rcpt("alice@example.org")),
        "action=DUNNO",
        "RCPT checks, it does not count",
      );
      assert.equal(await client.ask(endOfMessage("alice@example.org")), "action=DUNNO", `message ${i}`);
    }
    assert.equal(await client.ask(rcpt("alice@example.org")), DEFER_HOUR(3));
    assert.equal(await client.ask(endOfMessage("Alice@Example.org")), DEFER_HOUR(3));
    await adapter.waitForLog(
      "the refusal in the log",
      (line) => line.msg === "sending quota used up: mail deferred",
    );
  });

  test("per_day 2: the third message of the day is deferred, naming the daily limit", async () => {
    assert.equal(await client.ask(endOfMessage("daily@example.org")), "action=DUNNO");
    assert.equal(await client.ask(endOfMessage("daily@example.org")), "action=DUNNO");
    assert.equal(await client.ask(rcpt("daily@example.org")), DEFER_DAY(2));
  });

  test("unlimited (0/0) and unknown senders: DUNNO however much they send", async () => {
    for (let i = 0; i < 10; i++) {
      assert.equal(await client.ask(endOfMessage("bob@example.org")), "action=DUNNO");
    }
    assert.equal(await client.ask(endOfMessage("nobody@example.org")), "action=DUNNO");
    assert.equal(await client.ask(endOfMessage("not an address")), "action=DUNNO");
  });

  test("requests sent ahead on one connection are answered in order", async () => {
    const connection = await Connection.open(adapter.ports.policy);
    connection.write(
      [rcpt("bob@example.org"), rcpt("alice@example.org"), { sasl_username: "" }].map(policyRequest).join(""),
    );
    const pipelined = new PolicyClient(connection);
    assert.deepEqual(
      [await pipelined.reply(), await pipelined.reply(), await pipelined.reply()],
      ["action=DUNNO", DEFER_HOUR(3), "action=DUNNO"],
    );
    connection.close();
  });

  test("the service unreachable: DUNNO (fail-open) and a warning in the log", async () => {
    await accounts.proxy.stop();
    try {
      // alice's quota is used up, but nobody can say so now.
      assert.equal(await client.ask(endOfMessage("alice@example.org")), "action=DUNNO");
      const line = await adapter.waitForLog("the fail-open warning", (l) =>
        l.msg.startsWith("quota not checked (service unavailable)"),
      );
      assert.equal(line.level, "warn");
      assert.equal(line["sender"], "alice@example.org");
    } finally {
      await accounts.proxy.start();
    }
    assert.equal(await client.ask(rcpt("alice@example.org")), DEFER_HOUR(3));
  });

  test("a request without the sasl_username attribute (not Postfix): DUNNO, then the connection closes", async () => {
    const other = await Connection.open(adapter.ports.policy);
    other.write("request=smtpd_access_policy\nprotocol_state=RCPT\nsender=alice@example.org\n\n");
    assert.equal(await new PolicyClient(other).reply(), "action=DUNNO");
    assert.equal(await other.closedWithin(2000), true);
  });

  for (const [name, bytes] of [
    ["a line without =", "request=smtpd_access_policy\nthis is not an attribute\n\n"],
    ["no request=smtpd_access_policy", "protocol_state=RCPT\nsasl_username=alice@example.org\n\n"],
    ["an empty request", "\n\n"],
    ["an oversized request", `request=smtpd_access_policy\nccert_subject=${"x".repeat(70_000)}\n`],
  ] as const) {
    test(`bad input (${name}): DEFER_IF_PERMIT, that connection closes, the others keep working`, async () => {
      const bad = await Connection.open(adapter.ports.policy);
      bad.write(bytes);
      assert.equal(await new PolicyClient(bad).reply(), MALFORMED);
      assert.equal(await bad.closedWithin(2000), true, "the server closes the bad connection");
      assert.equal(await client.ask(rcpt("bob@example.org")), "action=DUNNO");
    });
  }
});

// ------------------------------------------------------------------------------------------------

const redisUrl = process.env["TEST_REDIS_URL"] ?? "redis://127.0.0.1:6379/0";

async function redisReachable(): Promise<boolean> {
  const { hostname, port } = new URL(redisUrl);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port || 6379) }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on("error", () => resolve(false));
    socket.setTimeout(1000, () => {
      socket.destroy();
      resolve(false);
    });
  });
}

const redisUp = await redisReachable();
if (!redisUp && process.env["CI"] === "true") {
  throw new Error(
    `Redis is not reachable at ${redisUrl}; CI must run the shared-counter tests (.ci/run starts redis-server)`,
  );
}
const skipRedis = redisUp
  ? false
  : `Redis is not reachable at ${redisUrl} (set TEST_REDIS_URL or start redis-server)`;
if (skipRedis) console.log(`# skipping the Redis tests: ${skipRedis}`);

describe("policy, counters shared in Redis", { skip: skipRedis }, () => {
  // A domain of this run's own: the Redis server outlives the test and may be shared.
  const domain = `run${Date.now().toString(36)}${process.pid}.example`;
  let accounts: Service;
  let first: Adapter;
  let second: Adapter;
  let redis: Redis;

  before(async () => {
    accounts = await startAccounts(domain);
    const { users } = accounts.service.services;
    await users.create({ email: `race@${domain}`, password, mailCrypt: false, smtpQuota: { per_hour: 5 } });
    await users.create({
      email: `window@${domain}`,
      password,
      mailCrypt: false,
      smtpQuota: { per_hour: 2, per_day: 3 },
    });
    const env = { SERVICE_URL: accounts.url, SERVICE_TOKEN: accounts.token, REDIS_URL: redisUrl };
    [first, second] = await Promise.all([startAdapter(env), startAdapter(env)]);
    redis = new Redis(redisUrl);
  });
  after(async () => {
    if (redis) {
      const keys = await redis.keys(`postfix-adapter:quota:*@${domain}`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
    await first?.stop();
    await second?.stop();
    await accounts?.close();
  });

  test("two adapters share one sender's counter", async () => {
    const a = await PolicyClient.open(first.ports.policy);
    const b = await PolicyClient.open(second.ports.policy);
    const alice = `alice@${domain}`;
    assert.equal(await a.ask(endOfMessage(alice)), "action=DUNNO");
    assert.equal(await b.ask(endOfMessage(alice)), "action=DUNNO");
    assert.equal(await a.ask(endOfMessage(alice)), "action=DUNNO");
    assert.equal(await b.ask(rcpt(alice)), DEFER_HOUR(3));
    assert.equal(await a.ask(rcpt(alice)), DEFER_HOUR(3));
    assert.equal(await redis.zcard(`postfix-adapter:quota:${alice}`), 3);
    const ttl = await redis.pttl(`postfix-adapter:quota:${alice}`);
    assert.ok(
      ttl > 86_000_000 && ttl <= 86_400_000,
      `the key expires a day after the last message (pttl ${ttl})`,
    );
    a.close();
    b.close();
  });

  test("the check and the count are one step: 12 concurrent messages against per_hour 5 pass exactly 5", async () => {
    const sender = `race@${domain}`;
    const clients = await Promise.all(
      Array.from({ length: 12 }, (_, i) => PolicyClient.open((i % 2 === 0 ? first : second).ports.policy)),
    );
    const answers = await Promise.all(clients.map((c) => c.ask(endOfMessage(sender))));
    assert.equal(answers.filter((a) => a === "action=DUNNO").length, 5, answers.join("\n"));
    assert.equal(answers.filter((a) => a === DEFER_HOUR(5)).length, 7);
    for (const c of clients) c.close();
  });

  test("sliding windows: messages older than an hour leave the hourly count, older than a day the daily one", async () => {
    const sender = `window@${domain}`;
    const key = `postfix-adapter:quota:${sender}`;
    const [seconds] = await redis.time();
    const now = Number(seconds) * 1000;
    // Sent earlier, as another adapter would have recorded them: 61 min and 25 h ago.
    await redis.zadd(key, now - 61 * 60_000, "old-1", now - 25 * 3_600_000, "older-1");
    const client = await PolicyClient.open(first.ports.policy);
    // The hour holds nothing yet; the day holds one (61 min ago); the 25 h one is gone.
    assert.equal(await client.ask(endOfMessage(sender)), "action=DUNNO");
    assert.equal(await client.ask(endOfMessage(sender)), "action=DUNNO");
    assert.equal(await redis.zcard(key), 3, "the message older than a day was removed");
    // Day: 3 of 3 used, hour: 2 of 2; the daily limit is the one named.
    assert.equal(await client.ask(rcpt(sender)), DEFER_DAY(3));
    client.close();
  });

  test("Redis unreachable: DUNNO (fail-open), a warning, and /health says so", async () => {
    // A port that was free a moment ago: nothing listens there.
    const closedPort = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const lost = await startAdapter({
      SERVICE_URL: accounts.url,
      SERVICE_TOKEN: accounts.token,
      REDIS_URL: `redis://127.0.0.1:${closedPort}`,
      SERVICE_TIMEOUT: "300ms",
    });
    try {
      const client = await PolicyClient.open(lost.ports.policy);
      for (let i = 0; i < 5; i++) {
        assert.equal(await client.ask(endOfMessage(`alice@${domain}`)), "action=DUNNO");
      }
      const line = await lost.waitForLog("the fail-open warning", (l) =>
        l.msg.startsWith("quota not checked (counters unavailable)"),
      );
      assert.equal(line.level, "warn");
      const health = await fetch(`http://127.0.0.1:${lost.ports.metrics}/health`);
      assert.equal(health.status, 200);
      assert.deepEqual(await health.json(), { status: "ok", redis: "unavailable" });
      const metrics = await (await fetch(`http://127.0.0.1:${lost.ports.metrics}/metrics`)).text();
      assert.match(metrics, /^postfix_adapter_policy_fail_open_total\{cause="redis"\} 5$/m);
      assert.match(metrics, /^postfix_adapter_redis_up 0$/m);
      client.close();
    } finally {
      await lost.stop();
    }
    const health = await fetch(`http://127.0.0.1:${first.ports.metrics}/health`);
    assert.deepEqual(await health.json(), { status: "ok", redis: "ready" });
  });
});
