import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { markDeleted, password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

describe("mta (Postfix lookups and SMTP auth)", () => {
  let service: TestService;
  let token: string;
  const get = (path: string) => service.request("GET", path, { token });

  before(async () => {
    service = await startService();
    token = await service.token("mta");
    const { domains, users, aliases, settings, database } = service.services;
    await domains.create("example.org");
    await domains.create("example.com");
    await users.create({
      email: "user@example.org",
      password,
      mailCrypt: false,
      smtpQuota: { per_hour: 10 },
    });
    await users.create({ email: "user2@example.org", password, mailCrypt: false });
    await users.create({ email: "spam@example.org", password, mailCrypt: false, roles: ["ROLE_SPAM"] });
    await users.create({
      email: "change@example.org",
      password,
      mailCrypt: false,
      passwordChangeRequired: true,
    });
    await users.create({ email: "gone@example.org", password, mailCrypt: false });
    await markDeleted(database.db, "gone@example.org");
    await aliases.create({ source: "alias@example.org", destinations: ["user2@example.org"] });
    await aliases.create({
      source: "multi@example.com",
      destinations: ["user@example.org", "someone@elsewhere.net"],
      smtpQuota: { per_hour: 5, per_day: 50 },
    });
    await aliases.create({ source: "user2@example.com", owner: "user2@example.org" });
    await aliases.create({ source: "old@example.org", destinations: ["user@example.org"] });
    await database.db
      .updateTable("aliases")
      .set({ deleted: 1 })
      .where("source", "=", "old@example.org")
      .execute();
    await settings.update({ smtp_quota_limit_per_day: 1000, postmaster_address: "admin@example.org" });
  });
  after(() => service.close());

  test("domain: true for managed domains, false otherwise", async () => {
    assert.deepEqual((await get("/api/mta/domain/example.org")).body, true);
    assert.deepEqual((await get("/api/mta/domain/EXAMPLE.COM")).body, true);
    assert.deepEqual((await get("/api/mta/domain/example.net")).body, false);
  });

  test("mailbox: true only for active users", async () => {
    assert.equal((await get("/api/mta/mailbox/user@example.org")).body, true);
    assert.equal((await get("/api/mta/mailbox/USER@example.org")).body, true);
    assert.equal((await get("/api/mta/mailbox/gone@example.org")).body, false);
    assert.equal((await get("/api/mta/mailbox/alias@example.org")).body, false);
    assert.equal((await get("/api/mta/mailbox/nobody@example.org")).body, false);
  });

  test("alias: destinations of active aliases, [] otherwise", async () => {
    assert.deepEqual((await get("/api/mta/alias/alias@example.org")).body, ["user2@example.org"]);
    assert.deepEqual((await get("/api/mta/alias/multi@example.com")).body, [
      "user@example.org",
      "someone@elsewhere.net",
    ]);
    assert.deepEqual((await get("/api/mta/alias/user2@example.com")).body, ["user2@example.org"]);
    assert.deepEqual((await get("/api/mta/alias/old@example.org")).body, []);
    assert.deepEqual((await get("/api/mta/alias/unknown@example.org")).body, []);
  });

  test("alias: postmaster and abuse of managed domains follow the settings", async () => {
    assert.deepEqual((await get("/api/mta/alias/postmaster@example.com")).body, ["admin@example.org"]);
    assert.deepEqual((await get("/api/mta/alias/Postmaster@example.org")).body, ["admin@example.org"]);
    assert.deepEqual((await get("/api/mta/alias/postmaster@unmanaged.net")).body, []);
    assert.deepEqual((await get("/api/mta/alias/abuse@example.org")).body, []);
  });

  test("senders: the mailbox itself, then alias destinations, without duplicates", async () => {
    assert.deepEqual((await get("/api/mta/senders/user@example.org")).body, ["user@example.org"]);
    assert.deepEqual((await get("/api/mta/senders/alias@example.org")).body, ["user2@example.org"]);
    assert.deepEqual((await get("/api/mta/senders/multi@example.com")).body, [
      "user@example.org",
      "someone@elsewhere.net",
    ]);
    assert.deepEqual((await get("/api/mta/senders/gone@example.org")).body, []);
    assert.deepEqual((await get("/api/mta/senders/nobody@example.org")).body, []);
  });

  test("smtp_quota: own limits, falling back to the settings; 404 for unknown", async () => {
    assert.deepEqual((await get("/api/mta/smtp_quota/user@example.org")).body, {
      per_hour: 10,
      per_day: 1000,
    });
    assert.deepEqual((await get("/api/mta/smtp_quota/user2@example.org")).body, {
      per_hour: 0,
      per_day: 1000,
    });
    assert.deepEqual((await get("/api/mta/smtp_quota/multi@example.com")).body, { per_hour: 5, per_day: 50 });
    for (const email of ["nobody@example.org", "gone@example.org", "old@example.org"]) {
      const res = await get(`/api/mta/smtp_quota/${email}`);
      assert.equal(res.status, 404, email);
      assert.deepEqual(res.body, { message: "user not found" });
    }
  });

  test("an address that is both a mailbox and an alias (legacy data): the mailbox comes first", async () => {
    const { users, database } = service.services;
    const { user } = await users.create({
      email: "both@example.org",
      password: "a long enough password",
      mailCrypt: false,
      smtpQuota: { per_hour: 7, per_day: 70 },
    });
    // The service refuses such an alias; imported data can still hold one.
    const now = Math.floor(Date.now() / 1000);
    await database.db
      .insertInto("aliases")
      .values({
        source: "both@example.org",
        domain_id: user.domainId,
        destinations: JSON.stringify(["both@example.org", "other@example.net"]),
        user_id: null,
        smtp_quota_per_hour: 1,
        smtp_quota_per_day: 2,
        created_at: now,
        updated_at: now,
        deleted: 0,
      })
      .execute();
    assert.deepEqual((await get("/api/mta/senders/both@example.org")).body, [
      "both@example.org",
      "other@example.net",
    ]);
    assert.deepEqual((await get("/api/mta/smtp_quota/both@example.org")).body, { per_hour: 7, per_day: 70 });
  });

  test("many lookups at once (one statement per turn on PostgreSQL) answer as each alone", async () => {
    const addresses = [
      "user@example.org",
      "USER@example.org",
      "user2@example.org",
      "gone@example.org",
      "alias@example.org",
      "multi@example.com",
      "user2@example.com",
      "old@example.org",
      "both@example.org",
      "nobody@example.org",
      "postmaster@example.com",
    ];
    const paths = [
      ...["example.org", "EXAMPLE.COM", "example.net"].map((domain) => `/api/mta/domain/${domain}`),
      ...["mailbox", "alias", "senders", "smtp_quota"].flatMap((kind) =>
        addresses.map((address) => `/api/mta/${kind}/${address}`),
      ),
    ];
    const alone: Awaited<ReturnType<typeof get>>[] = [];
    for (const path of paths) alone.push(await get(path));
    // A token that is well formed but unknown, asked in the same turns: refused on its own.
    const unknownToken = "ab".repeat(32);
    const together = await Promise.all(
      [...paths, ...paths].map((path, i) =>
        i % 7 === 3 ? service.request("GET", path, { token: unknownToken }) : get(path),
      ),
    );
    for (const [i, response] of together.entries()) {
      const path = paths[i % paths.length] as string;
      if (i % 7 === 3) {
        assert.equal(response.status, 401, path);
        continue;
      }
      const expected = alone[i % paths.length];
      assert.equal(response.status, expected?.status, path);
      assert.deepEqual(response.body, expected?.body, path);
    }
  });

  test("auth: 200, 401 for wrong or unknown, 403 for spam and password change", async () => {
    const cases: [string, string, number, string][] = [
      ["user@example.org", password, 200, "success"],
      ["user@example.org", "wrong password!!", 401, "authentication failed"],
      ["nobody@example.org", password, 401, "authentication failed"],
      ["gone@example.org", password, 401, "authentication failed"],
      ["spam@example.org", password, 403, "user disabled due to spam role"],
      ["change@example.org", password, 403, "user password change required"],
    ];
    for (const [email, pw, status, message] of cases) {
      const res = await service.request("POST", "/api/mta/auth", { token, json: { email, password: pw } });
      assert.equal(res.status, status, email);
      assert.deepEqual(res.body, { message }, email);
    }
  });

  test("auth: form bodies work, blank fields are 422", async () => {
    const form = await service.request("POST", "/api/mta/auth", {
      token,
      form: { email: "user@example.org", password },
    });
    assert.equal(form.status, 200);
    const blank = await service.request("POST", "/api/mta/auth", {
      token,
      json: { email: "user@example.org", password: "" },
    });
    assert.equal(blank.status, 422);
    assert.equal(typeof blank.body.message, "string");
    const missing = await service.request("POST", "/api/mta/auth", {
      token,
      json: { email: "user@example.org" },
    });
    assert.equal(missing.status, 422);
    const wrongType = await service.request("POST", "/api/mta/auth", {
      token,
      json: { email: "user@example.org", password: 12345678901234 },
    });
    assert.equal(wrongType.status, 422);
  });
});
