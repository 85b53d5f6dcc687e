import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { clientGroup } from "../src/accounts/client-address.ts";
import { accountCeiling, clientPolicy, delayAfter } from "../src/accounts/sign-in-guard.ts";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

describe("one brute-force policy across every door", () => {
  let service: TestService;
  let mailboxToken: string;
  let mtaToken: string;
  let identityToken: string;
  const metricsToken = "m".repeat(32);

  before(async () => {
    service = await startService({ metricsToken });
    mailboxToken = await service.token("mailbox-server");
    mtaToken = await service.token("mta");
    identityToken = await service.token("identity");
    await service.services.domains.create("example.org");
    for (const email of ["alice@example.org", "bob@example.org", "carol@example.org"])
      await service.services.users.create({ email, password, mailCrypt: false });
  });
  after(async () => service.close());
  beforeEach(async () => {
    await service.services.database.db.deleteFrom("sign_in_failures").execute();
  });

  const imap = (email: string, pass: string, client?: string) =>
    service.request("POST", `/api/mailbox-server/${email}`, {
      token: mailboxToken,
      json: { password: pass },
      headers: client ? { "x-client-address": client } : {},
    });
  const smtp = (email: string, pass: string, client?: string) =>
    service.request("POST", "/api/mta/auth", {
      token: mtaToken,
      json: { email, password: pass },
      headers: client ? { "x-client-address": client } : {},
    });

  test("a burst of wrong passwords through IMAP slows the next attempt through SMTP from that address; the owner elsewhere gets in at once", async () => {
    for (let i = 0; i < 5; i++)
      assert.equal((await imap("alice@example.org", "wrong password!!", "203.0.113.9")).status, 401);
    const throttled = await smtp("alice@example.org", password, "203.0.113.9");
    assert.equal(throttled.status, 429);
    assert.deepEqual(throttled.body, { message: "too many failed sign-ins, try again later" });
    assert.ok(Number(throttled.headers.get("retry-after")) >= 1);
    // The same address is throttled for other accounts too once it has failed often enough.
    assert.equal((await smtp("bob@example.org", password, "203.0.113.9")).status, 429);
    // The right password from a clean address works at once.
    assert.equal((await smtp("alice@example.org", password, "198.51.100.1")).status, 200);
    assert.equal((await imap("alice@example.org", password, "198.51.100.2")).status, 200);
  });

  test("without a client address a door is a client of its own for that account: its failures hold back only itself, and lapse", async () => {
    for (let i = 0; i < 5; i++)
      assert.equal((await smtp("carol@example.org", "wrong password!!")).status, 401);
    assert.equal((await smtp("carol@example.org", password)).status, 429);
    // Not "everyone": IMAP without an address, and SMTP for another account, are other clients.
    assert.equal((await imap("carol@example.org", password)).status, 200);
    assert.equal((await smtp("bob@example.org", password)).status, 200);
    // Time passes: the block lapses (moved in the database rather than waited for).
    await service.services.database.db
      .updateTable("sign_in_failures")
      .set({ blocked_until: Math.floor(Date.now() / 1000) - 1 })
      .execute();
    assert.equal((await smtp("carol@example.org", password)).status, 200);
    const row = await service.services.database.db
      .selectFrom("sign_in_failures")
      .select("failures")
      .where("subject", "=", "c:password:door:mta_auth:carol@example.org")
      .executeTakeFirstOrThrow();
    assert.equal(row.failures, 5, "the right password took back its own attempt, not the failures before it");
  });

  test("unknown addresses are throttled like known ones (no way to tell them apart), at the identity door too", async () => {
    for (let i = 0; i < 5; i++) {
      const answer = await service.request("POST", "/api/identity/example.org/validate/nobody@example.org", {
        token: identityToken,
        json: { password: "wrong password!!" },
        headers: { "x-client-address": "192.0.2.77" },
      });
      assert.equal(answer.status, 403);
    }
    const answer = await service.request("POST", "/api/identity/example.org/validate/nobody@example.org", {
      token: identityToken,
      json: { password },
      headers: { "x-client-address": "192.0.2.77" },
    });
    assert.equal(answer.status, 429);
  });

  test("throttled attempts are counted in the metrics", async () => {
    for (let i = 0; i < 6; i++) await smtp("bob@example.org", "wrong password!!", "192.0.2.99");
    const metrics = await service.request("GET", "/metrics", { token: metricsToken });
    assert.match(metrics.text, /sign_ins_total\{[^}]*result="throttled"[^}]*\} [1-9]/);
  });

  test("client addresses are grouped: IPv4 alone, IPv6 by /64, IPv4 in IPv6 spellings as IPv4; invite codes by network", () => {
    const cases: [string, string | null, string | null][] = [
      ["192.0.2.1", "192.0.2.1", "192.0.2.0/24"],
      [" 192.0.2.1 ", "192.0.2.1", "192.0.2.0/24"],
      ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64", "2001:db8:1::/48"],
      ["2001:DB8:1:2::9", "2001:db8:1:2::/64", "2001:db8:1::/48"],
      ["2001:db8:0001:0002::", "2001:db8:1:2::/64", "2001:db8:1::/48"],
      ["fe80::1%eth0", "fe80:0:0:0::/64", "fe80:0:0::/48"],
      ["::ffff:192.0.2.1", "192.0.2.1", "192.0.2.0/24"],
      ["0:0:0:0:0:ffff:192.0.2.1", "192.0.2.1", "192.0.2.0/24"],
      ["::ffff:c000:201", "192.0.2.1", "192.0.2.0/24"],
      ["::192.0.2.1", "192.0.2.1", "192.0.2.0/24"],
      ["::1", "0:0:0:0::/64", "0:0:0::/48"],
      ["junk", null, null],
      ["192.0.2.300", null, null],
      ["", null, null],
    ];
    for (const [address, subscriber, network] of cases) {
      assert.equal(clientGroup(address), subscriber, address);
      assert.equal(clientGroup(address, "network"), network, address);
    }
  });

  test("the delays grow with consecutive failures and stay bounded; old counters are forgotten", () => {
    assert.equal(delayAfter(clientPolicy, 4), 0);
    assert.equal(delayAfter(clientPolicy, 5), 5);
    assert.equal(delayAfter(clientPolicy, 6), 10);
    assert.equal(delayAfter(clientPolicy, 7), 20);
    assert.equal(delayAfter(clientPolicy, 100), 300, "a client waits five minutes at most");
    assert.equal(clientPolicy.forgetAfter, 3600);
    assert.equal(delayAfter(accountCeiling, accountCeiling.freeFailures - 1), 0);
    assert.equal(delayAfter(accountCeiling, accountCeiling.freeFailures), 86_400);
  });
});
