/**
 * The attacks of issue 28 against a real instance (loopback only, bounded in count and time), each
 * showing the sign-in guard held: parallel guesses at every door, a flood of abandoned sign-ins,
 * lock-out attempts, distributed guessing, rotating client addresses. docs/security.md states the
 * policy these tests hold the service to.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { availableParallelism, loadavg } from "node:os";
import { after, before, beforeEach, describe, test } from "node:test";
import { accountCeiling, clientPolicy } from "../src/accounts/sign-in-guard.ts";
import { currentTotpCode } from "../src/credentials/totp.ts";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";
import { WebClient } from "./helpers/web-client.ts";

const wrong = "wrong password, surely";
/** Every verdict the guard may hand out to one client before it throttles: its free failures, and the right one. */
const verdictCeiling = 15;

describe("the sign-in guard under attack", () => {
  let service: TestService;
  let tokens: Record<"mailbox" | "mta" | "webmail" | "identity" | "admin", string>;
  let recoveryToken: string;
  const db = () => service.services.database.db;

  before(async () => {
    service = await startService({ web: true, serviceOptions: { smtpUrl: "smtp://127.0.0.1:9" } });
    tokens = {
      mailbox: await service.token("mailbox-server"),
      mta: await service.token("mta"),
      webmail: await service.token("webmail"),
      identity: await service.token("identity"),
      admin: await service.token("admin"),
    };
    await service.services.domains.create("example.org");
    for (const email of ["alice@example.org", "bob@example.org", "carol@example.org", "dave@example.org"])
      await service.services.users.create({ email, password, mailCrypt: false });
    const created = await service.services.users.create({
      email: "erin@example.org",
      password,
      mailCrypt: true,
    });
    recoveryToken = created.recoveryToken ?? "";
  });
  after(async () => service?.close());
  beforeEach(async () => {
    await db().deleteFrom("sign_in_failures").execute();
    await db().deleteFrom("trusted_clients").execute();
    await db().deleteFrom("mail_outbox").execute();
    await db().deleteFrom("security_events").execute();
  });

  const api = (
    path: string,
    token: string,
    json: Record<string, unknown>,
    client?: string,
    signal?: AbortSignal,
  ) =>
    fetch(`${service.url}${path}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        ...(client ? { "x-client-address": client } : {}),
      },
      body: JSON.stringify(json),
      ...(signal ? { signal } : {}),
    }).then(async (response) => ({ status: response.status, text: await response.text() }));

  const passdb = (email: string, pass: string, client?: string) =>
    api(`/api/mailbox-server/${email}`, tokens.mailbox, { password: pass }, client);
  const smtp = (email: string, pass: string, client?: string) =>
    api("/api/mta/auth", tokens.mta, { email, password: pass }, client);

  /** The doors of the integration API that take a password, as one client calls them. */
  const apiDoors: Record<string, (pass: string, client: string) => Promise<{ status: number }>> = {
    passdb: (pass, client) => passdb("alice@example.org", pass, client),
    "SMTP auth": (pass, client) => smtp("alice@example.org", pass, client),
    "webmail aliases": (pass, client) =>
      api("/api/webmail/aliases", tokens.webmail, { email: "alice@example.org", password: pass }, client),
    "webmail password": (pass, client) =>
      api(
        "/api/webmail/password",
        tokens.webmail,
        { email: "alice@example.org", password: pass, newPassword: pass },
        client,
      ),
    "identity password": (pass, client) =>
      api(
        "/api/identity/example.org/validate/alice@example.org",
        tokens.identity,
        { password: pass },
        client,
      ),
  };

  /** Sends `count` attempts at once, the right one at `rightAt`; returns the statuses in order. */
  const burst = async (
    count: number,
    rightAt: number,
    send: (right: boolean) => Promise<{ status: number }>,
  ) => (await Promise.all(Array.from({ length: count }, (_, i) => send(i === rightAt)))).map((a) => a.status);

  const verdicts = (statuses: number[]) => statuses.filter((status) => status !== 429);

  test("100 parallel wrong passwords from one client at each door get a handful of verdicts, not 100", async () => {
    const table: Record<string, unknown>[] = [];
    for (const [door, send] of Object.entries(apiDoors)) {
      await db().deleteFrom("sign_in_failures").execute();
      const statuses = await burst(100, 79, (right) => send(right ? password : wrong, "203.0.113.50"));
      const checked = verdicts(statuses);
      table.push({ door, verdicts: checked.length, throttled: statuses.length - checked.length });
      assert.ok(checked.length <= verdictCeiling, `${door}: ${checked.length} verdicts`);
      assert.ok(
        checked.filter((status) => status !== 200).length <= clientPolicy.freeFailures,
        `${door}: at most the free failures were checked wrong`,
      );
      assert.ok(
        statuses.every((status) => [200, 401, 403, 429].includes(status)),
        `${door}: ${statuses.join(" ")}`,
      );
    }

    await db().deleteFrom("sign_in_failures").execute();
    const web = new WebClient(service.url);
    await web.get("/login");
    const statuses = await burst(100, 79, (right) =>
      web.post("/login", { email: "alice@example.org", password: right ? password : wrong }),
    );
    const checked = verdicts(statuses);
    table.push({ door: "web /login", verdicts: checked.length, throttled: statuses.length - checked.length });
    assert.ok(checked.length <= verdictCeiling, `web: ${checked.length} verdicts`);
    assert.ok(checked.filter((status) => status === 401).length <= clientPolicy.freeFailures);
    console.log("100 parallel attempts, one client:");
    console.table(table);
  });

  test("300 parallel codes at /2fa for a user with backup codes get a handful of verdicts; the right one among them is not let in", async () => {
    const setup = await service.request("PUT", "/api/admin/users/bob@example.org/totp", {
      token: tokens.admin,
      json: {},
    });
    assert.equal(setup.status, 200);
    const backupCodes = setup.body.backupCodes as string[];
    const web = new WebClient(service.url);
    await web.get("/login");
    const signedIn = await web.post("/login", { email: "bob@example.org", password });
    assert.equal(signedIn.location, "/2fa");
    await web.get("/2fa");
    const codes = new Set(backupCodes);
    const wrongCode = (i: number) => {
      let code = String(100000 + ((i * 7919) % 900000));
      while (codes.has(code)) code = String(Number(code) + 1);
      return code;
    };
    const started = Date.now();
    const statuses = await burst(300, 250, (right) =>
      web.post("/2fa", { code: right ? backupCodes[0]! : wrongCode(Math.floor(Math.random() * 1e6)) }),
    );
    const checked = verdicts(statuses);
    console.log(`300 parallel codes: ${checked.length} verdicts, ${Date.now() - started} ms`);
    assert.ok(checked.length <= verdictCeiling, `${checked.length} verdicts`);
    assert.ok(checked.filter((status) => status === 401).length <= clientPolicy.freeFailures);
    const row = await db()
      .selectFrom("users")
      .select("totp_backup_codes")
      .where("email", "=", "bob@example.org")
      .executeTakeFirstOrThrow();
    if (!checked.includes(303))
      assert.equal(JSON.parse(row.totp_backup_codes).length, 6, "no backup code was used up");
    await service.request("DELETE", "/api/admin/users/bob@example.org/totp", { token: tokens.admin });
  });

  test("200 wrong codes at identity otp: throttled after the free failures, then the right code too; another client is not held back", async () => {
    const secret = "JBSWY3DPEHPK3PXP";
    const setup = await service.request("PUT", "/api/admin/users/carol@example.org/totp", {
      token: tokens.admin,
      json: { secret, backupCodes: ["111111"] },
    });
    assert.equal(setup.status, 200);
    const otp = (code: string, client: string) =>
      api(
        "/api/identity/example.org/validate/carol@example.org",
        tokens.identity,
        { credentialType: "otp", password: code },
        client,
      );
    const statuses: number[] = [];
    for (let batch = 0; batch < 10; batch++)
      statuses.push(
        ...(await burst(20, -1, () => otp(String(200000 + statuses.length + batch), "198.51.100.20"))),
      );
    const checked = verdicts(statuses);
    assert.ok(checked.length <= clientPolicy.freeFailures, `${checked.length} codes checked of 200`);
    const right = currentTotpCode(secret, Date.now());
    assert.equal(
      (await otp(right, "198.51.100.20")).status,
      429,
      "the right code from the guessing client waits too",
    );
    assert.equal((await otp(right, "198.51.100.21")).status, 200, "another client is not held back");
    await service.request("DELETE", "/api/admin/users/carol@example.org/totp", { token: tokens.admin });
  });

  test("a flood of 300 abandoned sign-ins: a right passdb sign-in from another client is answered within 5 s, lookups keep a p99 under 250 ms", async (t) => {
    const web = new WebClient(service.url);
    await web.get("/login");
    const controller = new AbortController();
    const flood: Promise<unknown>[] = [];
    for (let i = 0; i < 100; i++)
      flood.push(
        api(
          `/api/mailbox-server/flood${i}@example.org`,
          tokens.mailbox,
          { password: wrong },
          `10.9.${i >> 8}.${i & 255}`,
          controller.signal,
        ).catch(() => undefined),
      );
    for (let i = 0; i < 200; i++)
      flood.push(
        fetch(`${service.url}/login`, {
          method: "POST",
          signal: controller.signal,
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ email: `flood${i}@example.org`, password: wrong }).toString(),
        }).catch(() => undefined),
      );
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort();
    const abortedAt = Date.now();
    await Promise.allSettled(flood);
    console.log(`flood settled ${Date.now() - abortedAt} ms after the abort`);

    const started = Date.now();
    const lookups: number[] = [];
    const lookupLoop = (async () => {
      while (Date.now() - started < 2000) {
        const t0 = performance.now();
        const answer = await service.request("GET", "/api/mta/mailbox/alice@example.org", {
          token: tokens.mta,
        });
        assert.equal(answer.status, 200);
        lookups.push(performance.now() - t0);
      }
    })();
    const answer = await passdb("alice@example.org", password, "192.0.2.200");
    const waited = Date.now() - started;
    await lookupLoop;
    const lookupsInOrder = [...lookups];
    lookups.sort((a, b) => a - b);
    const p99 = lookups[Math.floor(lookups.length * 0.99)] ?? 0;
    console.log(
      `after the flood: passdb answered in ${waited} ms; first lookups ${lookupsInOrder
        .slice(0, 5)
        .map((ms) => ms.toFixed(0))
        .join(
          " ",
        )} ms; ${lookups.length} lookups, p99 ${p99.toFixed(1)} ms; pool queue ${service.services.pool.queued}`,
    );
    assert.equal(answer.status, 200);
    assert.ok(waited < 5000, `the right passdb sign-in waited ${waited} ms`);
    // A machine with far more runnable threads than cores (other test files, other work) starves any
    // process: then the figure is printed and not judged; bench/README.md has the quiet measurement.
    const [load = 0] = loadavg();
    if (p99 >= 250 && load > 2 * availableParallelism())
      t.diagnostic(`lookups' p99 ${p99.toFixed(0)} ms not judged: load average ${load.toFixed(1)}`);
    else assert.ok(p99 < 250, `lookups' p99 ${p99} ms`);
  });

  test("no lock-out: failures on the web do not hold back the owner at passdb without an address; a trusted client gets in however many others guess", async () => {
    // The owner's browser signed in before (its device cookie), from the address the attackers use.
    const owner = new WebClient(service.url);
    await owner.signIn("dave@example.org");
    await owner.post("/logout");

    const web = new WebClient(service.url);
    await web.get("/login");
    for (let i = 0; i < 10; i++) await web.post("/login", { email: "dave@example.org", password: wrong });
    assert.equal((await passdb("dave@example.org", password)).status, 200, "passdb without X-Client-Address");

    // The owner's phone signed in from 192.0.2.10 before and mistyped once there; then eight fresh
    // addresses guess once each, and a NAT'd attacker on the owner's web address fails ten times.
    assert.equal((await passdb("dave@example.org", password, "192.0.2.10")).status, 200);
    assert.equal((await passdb("dave@example.org", wrong, "192.0.2.10")).status, 401);
    for (let i = 0; i < 8; i++)
      assert.equal((await passdb("dave@example.org", wrong, `198.51.100.${100 + i}`)).status, 401);
    assert.equal((await passdb("dave@example.org", password, "192.0.2.10")).status, 200);
    assert.equal((await smtp("dave@example.org", password, "192.0.2.10")).status, 200, "its SMTP too");
    assert.equal(
      (await passdb("dave@example.org", password, "192.0.2.11")).status,
      200,
      "a clean address too",
    );

    // Behind one NAT: the owner's address signed in before; a neighbour fails five times elsewhere.
    assert.equal((await passdb("bob@example.org", password, "203.0.113.60")).status, 200);
    for (let i = 0; i < 6; i++) await passdb(`neighbour${i}@example.org`, wrong, "203.0.113.60");
    assert.equal(
      (await passdb("nobody@example.org", password, "203.0.113.60")).status,
      429,
      "the neighbour waits",
    );
    assert.equal(
      (await passdb("bob@example.org", password, "203.0.113.60")).status,
      200,
      "the owner does not",
    );

    // A door without an address (userli's Dovecot adapter): the owner signed in through it before;
    // twenty guesses from new clients fill the daily ceiling; the owner still gets in there.
    assert.equal((await passdb("carol@example.org", password)).status, 200);
    for (let i = 0; i < 20; i++) await passdb("carol@example.org", wrong, `198.51.100.${150 + i}`);
    assert.equal(
      (await passdb("carol@example.org", password, "198.51.100.199")).status,
      429,
      "a new client waits",
    );
    assert.equal((await passdb("carol@example.org", password)).status, 200, "the owner's door does not");

    // The web: the attacker shares the owner's browser's address.
    const attacker = new WebClient(service.url);
    await attacker.get("/login");
    for (let i = 0; i < 10; i++)
      await attacker.post("/login", { email: "dave@example.org", password: wrong });
    assert.equal(
      (await attacker.post("/login", { email: "dave@example.org", password })).status,
      429,
      "the attacker's browser waits",
    );
    await owner.get("/login");
    const back = await owner.post("/login", { email: "dave@example.org", password });
    assert.equal(back.location, "/account", "the owner's browser gets in at once");
  });

  test("60 clients with one guess each: past the account's daily ceiling only clients that signed in before may try; the owner is told once", async () => {
    assert.equal((await passdb("alice@example.org", password, "192.0.2.77")).status, 200);
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++)
      statuses.push((await passdb("alice@example.org", i === 58 ? password : wrong, `198.18.${i}.1`)).status);
    const checked = verdicts(statuses);
    assert.equal(checked.length, accountCeiling.freeFailures, statuses.join(" "));
    assert.equal(statuses[58], 429, "the right password from a new client is not checked past the ceiling");
    assert.equal(
      (await passdb("alice@example.org", password, "192.0.2.77")).status,
      200,
      "the owner gets in",
    );
    const mails = await db()
      .selectFrom("mail_outbox")
      .select(["recipient", "subject", "body"])
      .where("recipient", "=", "alice@example.org")
      .execute();
    assert.equal(mails.length, 1, "one e-mail to the owner");
    assert.match(mails[0]!.subject, /guessing/);
    assert.ok(!mails[0]!.body.includes(wrong), "no guessed password in the e-mail");
    assert.match(mails[0]!.body, /198\.18\.\d+\.1/, "the latest client addresses");
    const ceiling = await db()
      .selectFrom("security_events")
      .select("type")
      .where("type", "=", "guessing.ceiling_reached")
      .where("email", "=", "alice@example.org")
      .execute();
    assert.equal(ceiling.length, 1, "the ceiling is a security event");

    // An unknown address answers the same way (counted alike), and nobody is mailed.
    const unknown: number[] = [];
    for (let i = 0; i < 60; i++)
      unknown.push((await smtp("nobody@example.org", wrong, `198.19.${i}.1`)).status);
    assert.equal(verdicts(unknown).length, accountCeiling.freeFailures);
    assert.equal(
      (await db().selectFrom("mail_outbox").select("id").execute()).length,
      1,
      "no e-mail for an unknown address",
    );
  });

  test("rotating X-Client-Address: anything but an IP address is a 400; IPv6 addresses count per /64", async () => {
    for (const junk of ["junk-1", "203.0.113.300", "1.2.3.4; 5.6.7.8", "::g", "a".repeat(60)]) {
      const answer = await smtp("alice@example.org", wrong, junk);
      assert.equal(answer.status, 400, junk);
      assert.match(answer.text, /X-Client-Address: must be an IP address/);
    }
    assert.equal(
      await db().selectFrom("sign_in_failures").select("subject").executeTakeFirst(),
      undefined,
      "refused before anything was counted",
    );
    const statuses: number[] = [];
    for (let i = 1; i <= 8; i++)
      statuses.push((await smtp("alice@example.org", wrong, `2001:db8:7:7::${i}`)).status);
    assert.deepEqual(statuses, [401, 401, 401, 401, 401, 429, 429, 429]);
    assert.equal((await smtp("alice@example.org", password, "2001:db8:7:8::1")).status, 200, "another /64");
    assert.equal((await smtp("alice@example.org", password, "::ffff:192.0.2.1")).status, 200);
  });

  test("unknown and known addresses get the same answers, in the same order", async () => {
    const run = async (email: string, client: string) => {
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) statuses.push((await smtp(email, wrong, client)).status);
      return statuses;
    };
    assert.deepEqual(
      await run("nobody@example.org", "192.0.2.91"),
      await run("alice@example.org", "192.0.2.92"),
    );
  });

  test("sign-ins are security events: failures (unknown addresses too), a new client's success, throttled answers once a minute; not every IMAP connection of a known client", async () => {
    const events = async () =>
      (
        await db()
          .selectFrom("security_events")
          .select(["type", "email", "door", "client_address"])
          .orderBy("id")
          .execute()
      ).map((row) => `${row.type} ${row.email ?? "-"} ${row.door} ${row.client_address ?? "-"}`);
    await passdb("alice@example.org", password, "192.0.2.31");
    await passdb("alice@example.org", password, "192.0.2.31");
    await smtp("nobody@example.org", wrong, "192.0.2.32");
    for (let i = 0; i < 8; i++) await smtp("bob@example.org", wrong, "192.0.2.33");
    const web = new WebClient(service.url);
    await web.signIn("carol@example.org");
    assert.deepEqual(await events(), [
      "sign_in.succeeded alice@example.org passdb 192.0.2.31",
      "sign_in.failed nobody@example.org mta_auth 192.0.2.32",
      ...Array(5).fill("sign_in.failed bob@example.org mta_auth 192.0.2.33"),
      "sign_in.throttled bob@example.org mta_auth 192.0.2.33",
      "sign_in.succeeded carol@example.org web 127.0.0.1",
    ]);
    const rows = await db().selectFrom("security_events").selectAll().execute();
    assert.ok(!JSON.stringify(rows).includes(wrong), "no password in any row");
  });

  test("a trusted client's parallel right sign-ins do not refuse each other (a phone's IMAP connections)", async () => {
    assert.equal((await passdb("alice@example.org", password, "192.0.2.55")).status, 200);
    const statuses = await burst(6, -1, () => passdb("alice@example.org", password, "192.0.2.55"));
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200]);
  });

  test("invite codes: 100 parallel guesses from one client get a handful of verdicts; then even a good code waits", async () => {
    await service.services.domains.updateInvitations("example.org", {
      enabled: true,
      limit: 3,
      waitingPeriodDays: 7,
    });
    const good = await service.services.inviteCodes.create({
      domain: "example.org",
      owner: "alice@example.org",
    });
    const web = new WebClient(service.url);
    await web.get("/");
    const guess = (i: number) =>
      `ABCDE-FGHJK-MNPQR-${String(10000 + i)
        .slice(-5)
        .replace(/[01]/g, "9")}`;
    const statuses = await burst(100, 79, (right) =>
      web.post("/", { inviteCode: right ? good.code : guess(Math.floor(Math.random() * 1e5)) }),
    );
    const checked = verdicts(statuses);
    assert.ok(checked.length <= verdictCeiling, `${checked.length} verdicts`);
    assert.ok(
      checked.filter((status) => status === 422).length <= clientPolicy.freeFailures,
      statuses.join(" "),
    );
    const again = await web.post("/", { inviteCode: good.code });
    assert.equal(again.status, 429, "the guessing client waits, whatever the code");
    assert.ok(Number(again.retryAfter) > 0);
    const other = await service.services.inviteCodes.check(good.code, {
      door: "web",
      client: { address: "192.0.2.160" },
    });
    assert.equal(other.code.code, good.code, "another client is not held back");
  });

  test("100 parallel wrong recovery tokens from one client get a handful of verdicts", async () => {
    const web = new WebClient(service.url);
    await web.get("/recovery");
    const statuses = await burst(100, 79, (right) =>
      web.post("/recovery", { email: "erin@example.org", token: right ? recoveryToken : randomUUID() }),
    );
    const checked = verdicts(statuses);
    assert.ok(checked.length <= verdictCeiling, `${checked.length} verdicts`);
    assert.ok(checked.filter((status) => status === 401).length <= clientPolicy.freeFailures);
  });
});
