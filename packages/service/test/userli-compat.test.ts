import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { hashToken } from "../src/tokens/tokens.ts";
import { password } from "./helpers/fixtures.ts";
import { type RequestOptions, startService, type TestService } from "./helpers/service.ts";

type Call = [method: string, path: string, options?: Omit<RequestOptions, "token">];

/** userli's prefix, ours, the two scope names and requests covering every route of the group. */
const groups: { userli: string; neutral: string; oldScope: string; newScope: string; calls: Call[] }[] = [
  {
    userli: "/api/dovecot",
    neutral: "/api/mailbox-server",
    oldScope: "dovecot",
    newScope: "mailbox-server",
    calls: [
      ["GET", "/status"],
      ["GET", "/alice@example.org"],
      ["GET", "/nobody@example.org"],
      ["GET", "/not an address"],
      ["POST", "/alice@example.org", { json: { password } }],
      ["POST", "/alice@example.org", { form: { password: "wrong password" } }],
      ["POST", "/alice@example.org", { json: {} }],
      ["DELETE", "/alice@example.org"],
    ],
  },
  {
    userli: "/api/postfix",
    neutral: "/api/mta",
    oldScope: "postfix",
    newScope: "mta",
    calls: [
      ["GET", "/domain/example.org"],
      ["GET", "/domain/example.net"],
      ["GET", "/mailbox/alice@example.org"],
      ["GET", "/alias/team@example.org"],
      ["GET", "/senders/team@example.org"],
      ["GET", "/smtp_quota/alice@example.org"],
      ["GET", "/smtp_quota/nobody@example.org"],
      ["POST", "/auth", { json: { email: "alice@example.org", password } }],
      ["POST", "/auth", { json: { email: "alice@example.org", password: "wrong" } }],
      ["POST", "/auth", { body: "{", headers: { "content-type": "application/json" } }],
      ["PUT", "/auth"],
    ],
  },
  {
    userli: "/api/roundcube",
    neutral: "/api/webmail",
    oldScope: "roundcube",
    newScope: "webmail",
    calls: [
      ["POST", "/aliases", { form: { email: "alice@example.org", password } }],
      ["POST", "/aliases", { json: { email: "alice@example.org", password: "wrong" } }],
      ["POST", "/aliases", { json: { email: "alice@example.org" } }],
    ],
  },
  {
    userli: "/api/keycloak",
    neutral: "/api/identity",
    oldScope: "keycloak",
    newScope: "identity",
    calls: [
      ["GET", "/example.org?search=a&max=10&first=0"],
      ["GET", "/example.org?max=abc"],
      ["GET", "/example.net"],
      ["GET", "/example.org/count"],
      ["GET", "/example.org/user/alice"],
      ["GET", "/example.org/user/nobody@example.org"],
      ["POST", "/example.org/validate/alice@example.org", { json: { password } }],
      ["POST", "/example.org/validate/alice@example.org", { json: { password, credentialType: "x" } }],
      ["GET", "/example.org/configured/password/alice@example.org"],
      ["GET", "/example.org/configured/otp/alice@example.org"],
    ],
  },
];

describe("USERLI_COMPAT=true: userli's prefixes and scope names", () => {
  let service: TestService;
  const tokens = new Map<string, string>();

  before(async () => {
    service = await startService({ userliCompat: true });
    const { domains, users, aliases } = service.services;
    await domains.create("example.org");
    for (const local of ["alice", "bob"]) {
      await users.create({ email: `${local}@example.org`, password, mailCrypt: false });
    }
    await aliases.create({ source: "team@example.org", owner: "alice@example.org" });
    for (const { oldScope, newScope } of groups) {
      tokens.set(oldScope, await service.token(oldScope as "dovecot"));
      tokens.set(newScope, await service.token(newScope as "mta"));
    }
  });
  after(() => service.close());

  for (const { userli, neutral, oldScope, newScope, calls } of groups) {
    test(`${userli} answers as ${neutral}, with a token of scope ${oldScope} or ${newScope}`, async () => {
      for (const scope of [oldScope, newScope]) {
        const token = tokens.get(scope);
        for (const [method, path, options] of calls) {
          const ours = await service.request(method, `${neutral}${path}`, { ...options, token });
          const theirs = await service.request(method, `${userli}${path}`, { ...options, token });
          const what = `${scope}: ${method} ${path}`;
          assert.doesNotMatch(ours.text, /API token|required scope/, what);
          assert.equal(theirs.status, ours.status, what);
          assert.equal(theirs.text, ours.text, what);
          assert.equal(theirs.headers.get("content-type"), ours.headers.get("content-type"), what);
          assert.equal(theirs.headers.get("allow"), ours.headers.get("allow"), what);
        }
      }
    });
  }

  test("a token of scope postfix gets 403 under /api/dovecot, as under /api/mailbox-server", async () => {
    for (const prefix of ["/api/dovecot", "/api/mailbox-server"]) {
      const res = await service.request("GET", `${prefix}/alice@example.org`, {
        token: tokens.get("postfix"),
      });
      assert.equal(res.status, 403, prefix);
      assert.equal(res.text, '{"message":"Token does not have required scope: mailbox-server"}');
    }
    const none = await service.request("GET", "/api/dovecot/alice@example.org");
    assert.equal(none.status, 401);
  });

  test("a token carried over from a userli database (old scope names stored) works on both prefixes", async () => {
    const plain = "ab".repeat(32);
    await service.services.database.db
      .insertInto("api_tokens")
      .values({
        name: "dovecot from userli",
        scopes: JSON.stringify(["dovecot", "keycloak"]),
        token_hash: hashToken(plain),
        created_at: 1700000000,
        last_used_at: null,
      })
      .execute();
    for (const path of ["/api/dovecot/alice@example.org", "/api/mailbox-server/alice@example.org"]) {
      assert.equal((await service.request("GET", path, { token: plain })).status, 200, path);
    }
    assert.equal(
      (await service.request("GET", "/api/keycloak/example.org/count", { token: plain })).text,
      "2",
    );
    assert.equal(
      (await service.request("GET", "/api/postfix/domain/example.org", { token: plain })).status,
      403,
    );
  });

  test("scopes are accepted in both spellings at creation and listed as stored", async () => {
    const admin = await service.token("admin");
    const created = await service.request("POST", "/api/admin/api-tokens", {
      token: admin,
      json: { name: "userli names", scopes: ["postfix", "mta", "roundcube", "retention"] },
    });
    assert.equal(created.status, 201, created.text);
    const listed = await service.request("GET", "/api/admin/api-tokens", { token: admin });
    const token = (listed.body.items as { name: string; scopes: string[] }[]).find(
      (t) => t.name === "userli names",
    );
    assert.deepEqual(token?.scopes, ["postfix", "mta", "roundcube", "retention"]);
    const refused = await service.request("POST", "/api/admin/api-tokens", {
      token: admin,
      json: { name: "x", scopes: ["Dovecot"] },
    });
    assert.equal(refused.status, 422);
  });
});

describe("without USERLI_COMPAT", () => {
  let service: TestService;

  before(async () => {
    service = await startService();
    await service.services.domains.create("example.org");
  });
  after(() => service.close());

  test("userli's prefixes are unknown (404), the scope names still work on the neutral paths", async () => {
    const token = await service.token("postfix", "dovecot", "keycloak", "roundcube");
    for (const path of [
      "/api/dovecot/status",
      "/api/postfix/domain/example.org",
      "/api/keycloak/example.org/count",
      "/api/roundcube/aliases",
    ]) {
      const res = await service.request("GET", path, { token });
      assert.equal(res.status, 404, path);
      assert.equal(res.text, '{"message":"Not found"}');
    }
    assert.equal((await service.request("GET", "/api/mta/domain/example.org", { token })).status, 200);
    assert.equal((await service.request("GET", "/api/identity/example.org/count", { token })).text, "0");
  });
});
