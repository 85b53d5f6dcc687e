import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as openpgp from "openpgp";
import { consoleActor, notPermitted, userActor } from "../src/accounts/admin-scope.ts";
import type { UserListFilter } from "../src/admin/users.ts";
import { flag, toFlag } from "../src/db/schema.ts";
import { isRefusal } from "../src/errors.ts";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";
import { fieldError, WebClient } from "./helpers/web-client.ts";

/**
 * Who may do what in the admin area (reference 5.1, 5.2, 5.8), over HTTP on the database
 * TEST_DATABASE_URL names: admins everything; a domain admin its own domain's users (never an
 * admin), aliases, invite codes and keys, only the roles USER, PERMANENT and DOMAIN_ADMIN, and
 * nothing installation-wide; everyone else nothing. The pages answer as the admin services decide.
 */
describe("admin area: who may do what", () => {
  let service: TestService;
  let adminClient: WebClient;
  let domainAdmin: WebClient;
  let plain: WebClient;

  before(async () => {
    service = await startService({ web: true });
    const { domains, users, aliases } = service.services;
    await domains.create("example.org");
    await domains.create("example.net");
    await users.create({ email: "admin@example.org", password, roles: ["ROLE_ADMIN"] });
    await users.create({ email: "da@example.org", password, roles: ["ROLE_DOMAIN_ADMIN"] });
    await users.create({ email: "boss@example.org", password, roles: ["ROLE_ADMIN"] });
    await users.create({ email: "bob@example.org", password });
    await users.create({ email: "spammy@example.org", password, roles: ["ROLE_SPAM"] });
    await users.create({ email: "carol@example.net", password });
    await users.create({ email: "plain@example.org", password });
    await aliases.create({ source: "team@example.net", destinations: ["carol@example.net"] });
    adminClient = new WebClient(service.url);
    domainAdmin = new WebClient(service.url);
    plain = new WebClient(service.url);
    await adminClient.signIn("admin@example.org");
    await domainAdmin.signIn("da@example.org");
    await plain.signIn("plain@example.org");
  });
  after(async () => {
    await service?.close();
  });

  test("a user without an admin role gets 403 on every admin page; a visitor is sent to sign in", async () => {
    for (const path of ["/admin", "/admin/users", "/admin/users/bob%40example.org", "/admin/audit-log"])
      assert.equal((await plain.get(path)).status, 403, path);
    assert.equal((await plain.post("/admin/users/bob%40example.org/delete")).status, 403);
    assert.equal((await service.services.users.get("bob@example.org")).deleted, false);
    const visitor = new WebClient(service.url);
    const answer = await visitor.get("/admin/users");
    assert.equal(answer.status, 303);
    assert.equal(answer.location, "/login");
  });

  test("a domain admin lists its own domain's users, never an admin or another domain's", async () => {
    const page = await domainAdmin.get("/admin/users?status=all");
    assert.equal(page.status, 200);
    for (const seen of ["da@example.org", "bob@example.org", "plain@example.org", "spammy@example.org"])
      assert.ok(page.text.includes(seen), seen);
    for (const hidden of ["admin@example.org", "boss@example.org", "carol@example.net"])
      assert.ok(!page.text.includes(`>${hidden}<`), hidden);
    // Asking for another domain by its id changes nothing.
    const net = await service.services.domains.get("example.net");
    const other = await domainAdmin.get(`/admin/users?domain=${net.id}`);
    assert.ok(!other.text.includes("carol@example.net"));
    const aliases = await domainAdmin.get("/admin/aliases");
    assert.ok(!aliases.text.includes("team@example.net"));
  });

  test("a domain admin gets 403 on another domain's user and on an admin, by URL, and changes nothing", async () => {
    for (const email of ["carol@example.net", "boss@example.org"]) {
      const path = `/admin/users/${encodeURIComponent(email)}`;
      for (const suffix of ["", "/edit", "/delete", "/reset"])
        assert.equal((await domainAdmin.get(`${path}${suffix}`)).status, 403, `${path}${suffix}`);
      await domainAdmin.get("/admin/users");
      assert.equal((await domainAdmin.post(`${path}/delete`)).status, 403);
      assert.equal((await domainAdmin.post(`${path}/edit`, { quota: "1" })).status, 403);
      assert.equal(
        (
          await domainAdmin.post(`${path}/reset`, {
            password: "a brand new password 1",
            passwordRepeat: "a brand new password 1",
          })
        ).status,
        403,
      );
      const user = await service.services.users.get(email);
      assert.equal(user.deleted, false);
      assert.equal(user.quota, null);
    }
    assert.equal((await domainAdmin.get("/admin/aliases/team%40example.net/edit")).status, 403);
    assert.equal((await domainAdmin.get("/admin/domains/example.net")).status, 403);
  });

  test("a domain admin gets 403 on everything installation-wide", async () => {
    for (const path of [
      "/admin/domains",
      "/admin/domains/example.org/delete",
      "/admin/settings",
      "/admin/api-tokens",
      "/admin/webhooks",
      "/admin/webhooks/new",
      "/admin/reserved-names",
      "/admin/reserved-names/export",
      "/admin/maintenance",
    ])
      assert.equal((await domainAdmin.get(path)).status, 403, path);
    await domainAdmin.get("/admin");
    for (const [path, form] of [
      ["/admin/settings", { app_name: "Taken over" }],
      ["/admin/api-tokens", { name: "mine", scopes: "admin" }],
      ["/admin/domains", { name: "evil.example" }],
      ["/admin/maintenance/remove-inactive-users/run", {}],
      ["/admin/reserved-names", { name: "boss" }],
    ] as const)
      assert.equal((await domainAdmin.post(path, form)).status, 403, path);
    assert.equal(await service.services.settings.get("app_name"), "Userli");
    assert.equal((await service.services.tokens.list()).length, 0);
    assert.equal(await service.services.domains.find("evil.example"), null);
    // Its own domain's page is its to see, with the invitation settings.
    const own = await domainAdmin.get("/admin/domain");
    assert.equal(own.location, "/admin/domains/example.org");
    assert.equal((await domainAdmin.get("/admin/domains/example.org")).status, 200);
    const saved = await domainAdmin.post("/admin/domains/example.org/invitations", {
      invitationEnabled: "yes",
      invitationLimit: "3",
      waitingPeriodDays: "7",
    });
    assert.equal(saved.status, 303);
    const org = await service.services.domains.get("example.org");
    assert.deepEqual(await service.services.domains.invitations(org.id), {
      enabled: true,
      limit: 3,
      waitingPeriodDays: 7,
    });
  });

  test("a domain admin assigns only USER, PERMANENT and DOMAIN_ADMIN, and creates users only in its domain", async () => {
    await domainAdmin.get("/admin/users/new");
    const newUser = (email: string, roles: string[]) =>
      domainAdmin.post("/admin/users/new", { email, password, passwordRepeat: password, roles });
    const refused = await newUser("root@example.org", ["ROLE_ADMIN"]);
    assert.equal(refused.status, 422);
    assert.match(fieldError(refused.text, "roles") ?? "", /not allowed to assign/);
    assert.equal(await service.services.users.findByEmail("root@example.org"), null);
    const otherDomain = await newUser("dave@example.net", []);
    assert.equal(otherDomain.status, 403);
    assert.ok(fieldError(otherDomain.text, "email"));
    assert.equal(await service.services.users.findByEmail("dave@example.net"), null);
    const created = await newUser("helper@example.org", ["ROLE_DOMAIN_ADMIN", "ROLE_PERMANENT"]);
    assert.equal(created.status, 200);
    assert.deepEqual((await service.services.users.get("helper@example.org")).roles, [
      "ROLE_USER",
      "ROLE_PERMANENT",
      "ROLE_DOMAIN_ADMIN",
    ]);
    // The form offers only the assignable roles.
    const form = await domainAdmin.get("/admin/users/bob%40example.org/edit");
    assert.ok(form.text.includes('value="ROLE_PERMANENT"'));
    assert.ok(!form.text.includes('value="ROLE_ADMIN"'));
    assert.ok(!form.text.includes('value="ROLE_SPAM"'));
    // A crafted form with ROLE_ADMIN is refused, nothing changes.
    const crafted = await domainAdmin.post("/admin/users/bob%40example.org/edit", {
      roles: ["ROLE_ADMIN"],
      quota: "5",
    });
    assert.equal(crafted.status, 422);
    const bob = await service.services.users.get("bob@example.org");
    assert.deepEqual(bob.roles, ["ROLE_USER"]);
    assert.equal(bob.quota, null);
    // A role it may not assign stays as it is when it edits the user.
    await domainAdmin.get("/admin/users/spammy%40example.org/edit");
    const kept = await domainAdmin.post("/admin/users/spammy%40example.org/edit", {
      roles: ["ROLE_PERMANENT"],
      quota: "10",
    });
    assert.equal(kept.status, 303);
    const spammy = await service.services.users.get("spammy@example.org");
    assert.deepEqual(spammy.roles, ["ROLE_USER", "ROLE_SPAM", "ROLE_PERMANENT"]);
    assert.equal(spammy.quota, 10);
  });

  test("a domain admin's aliases: its own domain, its own users as owners, always forwarding to the owner", async () => {
    await domainAdmin.get("/admin/aliases/new");
    const create = (form: Record<string, string>) => domainAdmin.post("/admin/aliases/new", form);
    const created = await create({
      source: "info@example.org",
      owner: "bob@example.org",
      destinations: "x@elsewhere.example",
    });
    assert.equal(created.status, 303);
    const info = await service.services.aliases.get("info@example.org");
    assert.deepEqual(info.destinations, ["bob@example.org"]);
    assert.equal(info.owner, "bob@example.org");
    assert.equal((await create({ source: "sales@example.net", owner: "bob@example.org" })).status, 403);
    assert.equal((await create({ source: "boss-mail@example.org", owner: "boss@example.org" })).status, 403);
    const none = await create({ source: "mine@example.org" });
    assert.equal(none.status, 303);
    assert.equal((await service.services.aliases.get("mine@example.org")).owner, "da@example.org");
    for (const source of ["sales@example.net", "boss-mail@example.org"])
      await assert.rejects(service.services.aliases.get(source));
  });

  test("an admin reaches every domain and user, and assigns every role", async () => {
    const page = await adminClient.get("/admin/users?status=all");
    for (const seen of ["admin@example.org", "boss@example.org", "carol@example.net"])
      assert.ok(page.text.includes(seen));
    await adminClient.get("/admin/users/carol%40example.net/edit");
    const saved = await adminClient.post("/admin/users/carol%40example.net/edit", {
      roles: ["ROLE_ADMIN", "ROLE_MULTIPLIER"],
      quota: "2048",
      smtpPerHour: "10",
      passwordChangeRequired: "yes",
    });
    assert.equal(saved.status, 303);
    const carol = await service.services.users.get("carol@example.net");
    assert.deepEqual(carol.roles, ["ROLE_USER", "ROLE_MULTIPLIER", "ROLE_ADMIN"]);
    assert.equal(carol.quota, 2048);
    assert.deepEqual(carol.smtpQuota, { perHour: 10, perDay: null });
    assert.equal(carol.passwordChangeRequired, true);
    // A bad number is a field error and changes nothing.
    const bad = await adminClient.post("/admin/users/carol%40example.net/edit", { quota: "lots" });
    assert.equal(bad.status, 422);
    assert.ok(fieldError(bad.text, "quota"));
    assert.equal((await service.services.users.get("carol@example.net")).quota, 2048);
  });

  test("the settings form refuses each bad value at once and saves nothing; a good form saves all", async () => {
    const form = await adminClient.get("/admin/settings");
    const current = Object.fromEntries(
      [
        ...form.text.matchAll(/<input id="field-([a-z_]+)" name="[a-z_]+" type="[a-z]+" value="([^"]*)"/g),
      ].map((m) => [m[1] as string, (m[2] as string).replaceAll("&#39;", "'").replaceAll("&amp;", "&")]),
    );
    const bad = await adminClient.post("/admin/settings", {
      ...current,
      app_name: "x",
      mail_crypt: "2",
      mta_sts_mode: "testing",
      inactive_user_days: "3",
      email_sender_address: "not an address",
    });
    assert.equal(bad.status, 422);
    for (const field of ["app_name", "inactive_user_days", "email_sender_address"])
      assert.ok(fieldError(bad.text, field), field);
    assert.equal(await service.services.settings.get("app_name"), "Userli");
    const good = await adminClient.post("/admin/settings", {
      ...current,
      app_name: "Example Mail",
      mail_crypt: "2",
      mta_sts_mode: "enforce",
      weekly_report_enabled: "yes",
    });
    assert.equal(good.status, 303);
    assert.equal(await service.services.settings.get("app_name"), "Example Mail");
    assert.equal(await service.services.settings.get("mta_sts_mode"), "enforce");
  });

  test("the users list pages by keyset: pages never overlap and reach every user, both ways", async () => {
    const { users } = service.services;
    for (let i = 0; i < 45; i++)
      await users.create({ email: `many${String(i).padStart(2, "0")}@example.org`, password });
    const seen: string[] = [];
    let path = "/admin/users?search=many";
    const cursors: string[] = [];
    for (;;) {
      const page = await adminClient.get(path);
      seen.push(...[...page.text.matchAll(/>(many\d\d@example\.org)</g)].map((m) => m[1] as string));
      const older = /href="(\/admin\/users\?[^"]*after=\d+)"/.exec(page.text)?.[1];
      if (!older) break;
      path = older.replaceAll("&amp;", "&");
      cursors.push(path);
    }
    assert.equal(seen.length, 45);
    assert.equal(new Set(seen).size, 45);
    assert.deepEqual(seen, [...seen].sort().reverse(), "newest first");
    // Back from the last page: the newer page is the one before it.
    const last = await adminClient.get(cursors.at(-1) as string);
    const newer = /href="(\/admin\/users\?[^"]*before=\d+)"/.exec(last.text)?.[1]?.replaceAll("&amp;", "&");
    assert.ok(newer);
    const back = await adminClient.get(newer);
    const backEmails = [...back.text.matchAll(/>(many\d\d@example\.org)</g)].map((m) => m[1]);
    assert.deepEqual(backEmails, seen.slice(20, 40));
    // Without a search the pages are read by the cursor from the index and counted apart.
    const everyone: string[] = [];
    let next: string | undefined = "/admin/users?status=all";
    while (next) {
      const page = await adminClient.get(next);
      everyone.push(
        ...[...page.text.matchAll(/<td><a href="\/admin\/users\/[^"]+">([^<]+)<\/a><\/td>/g)].map(
          (m) => m[1] as string,
        ),
      );
      next = /href="(\/admin\/users\?[^"]*after=\d+)"/.exec(page.text)?.[1]?.replaceAll("&amp;", "&");
    }
    const stored = await service.services.database.db
      .selectFrom("users")
      .select("email")
      .orderBy("id", "desc")
      .execute();
    assert.deepEqual(
      everyone,
      stored.map((row) => row.email),
    );
    assert.match(
      (await adminClient.get("/admin/users?status=all")).text,
      new RegExp(`${stored.length} users match`),
    );
  });

  test("the users list counts matches up to a bound: past it the page says 'more than', and still pages through every match", async () => {
    const { admin, users } = service.services;
    for (let i = 0; i < 25; i++)
      await users.create({ email: `bounded${String(i).padStart(2, "0")}@example.org`, password });
    const filter = { search: "bounded", status: "active" as const };
    const exact = await admin.users.list(consoleActor, filter, {}, 10, 25);
    assert.equal(exact.total, 25);
    assert.equal(exact.totalAtLeast, false);
    const bounded = await admin.users.list(consoleActor, filter, {}, 10, 24);
    assert.equal(bounded.total, 24);
    assert.equal(bounded.totalAtLeast, true);
    assert.deepEqual(
      bounded.items.map((u) => u.email),
      exact.items.map((u) => u.email),
    );
    // Past the bound the pages are read by the cursor: every match once, newest first, and back.
    const seen: string[] = [];
    let page = bounded;
    const olders: number[] = [];
    for (;;) {
      seen.push(...page.items.map((u) => u.email));
      if (page.older === null) break;
      olders.push(page.older);
      page = await admin.users.list(consoleActor, filter, { after: page.older }, 10, 5);
      assert.equal(page.totalAtLeast, true);
    }
    const expected = Array.from(
      { length: 25 },
      (_, i) => `bounded${String(24 - i).padStart(2, "0")}@example.org`,
    );
    assert.deepEqual(seen, expected);
    assert.ok(page.newer !== null);
    const back = await admin.users.list(consoleActor, filter, { before: page.newer }, 10, 5);
    assert.deepEqual(
      back.items.map((u) => u.email),
      expected.slice(10, 20),
    );
    const text = (await adminClient.get("/admin/users?search=bounded")).text;
    assert.match(text, /25 users match/);
  });

  test("the role filter lists exactly the users whose stored roles name the role, in every combination", async () => {
    const { admin, users, database } = service.services;
    const stored: Record<string, string> = {
      "rf-spam@example.org": '["ROLE_USER","ROLE_SPAM"]',
      "rf-spam-only@example.org": '["ROLE_SPAM"]',
      "rf-spam-suspicious@example.org": '["ROLE_USER","ROLE_SUSPICIOUS","ROLE_SPAM"]',
      "rf-suspicious@example.org": '["ROLE_USER","ROLE_SUSPICIOUS"]',
      "rf-spam-permanent@example.net": '["ROLE_USER","ROLE_SPAM","ROLE_PERMANENT"]',
      "rf-spam-deleted@example.org": '["ROLE_USER","ROLE_SPAM"]',
      "rf-permanent@example.org": '["ROLE_PERMANENT","ROLE_USER"]',
      "rf-empty@example.org": "[]",
      "rf-broken@example.org": "not json",
    };
    for (const [email, roles] of Object.entries(stored)) {
      await users.create({ email, password });
      await database.db.updateTable("users").set({ roles }).where("email", "=", email).execute();
    }
    await database.db
      .updateTable("users")
      .set({ deleted: toFlag(true) })
      .where("email", "=", "rf-spam-deleted@example.org")
      .execute();
    const everyone = await database.db
      .selectFrom("users")
      .select(["email", "roles", "deleted"])
      .orderBy("id", "desc")
      .execute();
    const expected = (role: string, status: "active" | "deleted" | "all") =>
      everyone
        .filter((u) => u.roles.includes(`"${role}"`))
        .filter((u) => status === "all" || flag(u.deleted) === (status === "deleted"))
        .map((u) => u.email);
    const listed = async (filter: UserListFilter, counted: number) => {
      const seen: string[] = [];
      let page = await admin.users.list(consoleActor, filter, {}, 2, counted);
      const total = page.total;
      for (;;) {
        seen.push(...page.items.map((u) => u.email));
        if (page.older === null) return { seen, total };
        page = await admin.users.list(consoleActor, filter, { after: page.older }, 2, counted);
      }
    };
    for (const role of [
      "ROLE_SPAM",
      "ROLE_SUSPICIOUS",
      "ROLE_PERMANENT",
      "ROLE_USER",
      "ROLE_ADMIN",
      "ROLE_MULTIPLIER",
    ] as const)
      for (const status of ["active", "deleted", "all"] as const) {
        const want = expected(role, status);
        const exact = await listed({ search: "", status, role }, 10_000);
        assert.deepEqual(exact, { seen: want, total: want.length }, `${role} ${status}`);
        // Past the count's bound the pages come from the cursor, through the same filter.
        const bounded = await listed({ search: "", status, role }, 3);
        assert.deepEqual(bounded.seen, want, `${role} ${status}, bounded`);
      }
    assert.ok(expected("ROLE_SPAM", "all").length >= 5);
    const combined = await listed({ search: "example.net", status: "active", role: "ROLE_SPAM" }, 10_000);
    assert.deepEqual(combined.seen, ["rf-spam-permanent@example.net"]);
  });

  test("the audit log page: an admin sees every entry, a domain admin only its own domain's", async () => {
    const all = await adminClient.get("/admin/audit-log");
    assert.equal(all.status, 200);
    assert.ok(all.text.includes("carol@example.net"));
    assert.ok(all.text.includes("<td>settings.update</td>"));
    const own = await domainAdmin.get("/admin/audit-log");
    assert.equal(own.status, 200);
    assert.ok(own.text.includes("helper@example.org"));
    assert.ok(!own.text.includes("carol@example.net"));
    assert.ok(!own.text.includes("<td>settings.update</td>"));
    const filtered = await adminClient.get("/admin/audit-log?action=user.create&actor=da%40example.org");
    assert.ok(filtered.text.includes("helper@example.org"));
    assert.ok(!filtered.text.includes("<td>user.update</td>"));
    assert.equal((await adminClient.get("/admin/audit-log?since=yesterday")).status, 422);
    const org = await service.services.domains.get("example.org");
    const da = userActor(await service.services.users.get("da@example.org"), null);
    assert.ok(da);
    const entries = await service.services.admin.auditLog.list(da, {}, { limit: 500, offset: 0 });
    assert.ok(entries.items.every((entry) => entry.targetDomainId === org.id));
    assert.ok(
      entries.items.some((entry) => entry.action === "domain.update" && entry.clientAddress === "127.0.0.1"),
    );
  });
  test("a domain admin neither replaces nor removes the OpenPGP key of an admin's address or of an alias an admin owns, nor deletes that alias; its own users' keys it may", async () => {
    const { admin, aliases, openPgpKeys, users } = service.services;
    const key = async (email: string) =>
      (
        await openpgp.generateKey({
          type: "ecc",
          curve: "curve25519Legacy",
          userIDs: [{ email }],
          format: "armored",
        })
      ).publicKey;
    const token = await service.token("admin");
    await aliases.create({ source: "boss-alias@example.org", owner: "boss@example.org" });
    // The admin API (an admin token reaches everything) publishes both keys.
    for (const email of ["boss@example.org", "boss-alias@example.org"]) {
      const put = await service.request("PUT", `/api/admin/openpgp-keys/${email}`, {
        token,
        json: { key: await key(email) },
      });
      assert.equal(put.status, 200, email);
    }
    const da = userActor(await users.get("da@example.org"), null);
    assert.ok(da);
    for (const email of ["boss@example.org", "boss-alias@example.org"]) {
      const before = (await openPgpKeys.get(email)).fingerprint;
      await domainAdmin.get("/admin/openpgp-keys");
      const replaced = await domainAdmin.post("/admin/openpgp-keys", { email, keyText: await key(email) });
      assert.equal(replaced.status, 403, `replace ${email}`);
      await domainAdmin.get("/admin/openpgp-keys");
      const removed = await domainAdmin.post(`/admin/openpgp-keys/${encodeURIComponent(email)}/delete`);
      assert.equal(removed.status, 403, `remove ${email}`);
      assert.equal((await openPgpKeys.get(email)).fingerprint, before, `${email} keeps its key`);
      // The service itself refuses, whatever surface calls it.
      await assert.rejects(admin.openPgpKeys.delete(da, email), (error) => isRefusal(error, notPermitted));
      await assert.rejects(admin.openPgpKeys.import(da, email, await key(email)), (error) =>
        isRefusal(error, notPermitted),
      );
    }
    await domainAdmin.get("/admin/aliases");
    const aliasGone = await domainAdmin.post("/admin/aliases/boss-alias%40example.org/delete");
    assert.equal(aliasGone.status, 403);
    assert.equal((await aliases.get("boss-alias@example.org")).deleted, false);
    await assert.rejects(admin.aliases.delete(da, "boss-alias@example.org"), (error) =>
      isRefusal(error, notPermitted),
    );
    // A user of its own domain is in reach: upload and removal work.
    await domainAdmin.get("/admin/openpgp-keys");
    const own = await domainAdmin.post("/admin/openpgp-keys", {
      email: "bob@example.org",
      keyText: await key("bob@example.org"),
    });
    assert.equal(own.status, 303, own.text);
    await domainAdmin.get("/admin/openpgp-keys");
    assert.equal((await domainAdmin.post("/admin/openpgp-keys/bob%40example.org/delete")).status, 303);
    await assert.rejects(openPgpKeys.get("bob@example.org"));
  });

  test("enabling TOTP through the admin API ends the user's password-only web sessions", async () => {
    await service.services.users.create({ email: "totp@example.org", password });
    const user = new WebClient(service.url);
    await user.signIn("totp@example.org");
    assert.equal((await user.get("/account")).status, 200);
    const other = new WebClient(service.url);
    await other.signIn("plain@example.org");
    const token = await service.token("admin");
    const enabled = await service.request("PUT", "/api/admin/users/totp@example.org/totp", {
      token,
      json: {},
    });
    assert.equal(enabled.status, 200);
    const after = await user.get("/account");
    assert.equal(after.status, 303);
    assert.equal(after.location, "/login");
    assert.equal((await other.get("/account")).status, 200, "another user's session stays");
  });
});
