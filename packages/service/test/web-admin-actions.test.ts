import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as openpgp from "openpgp";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";
import { fieldError, WebClient } from "./helpers/web-client.ts";

/**
 * The admin area's actions over HTTP, on the database TEST_DATABASE_URL names: domains (the force
 * path and its counts, never the admin's own), invite codes (a domain admin only for its inviting
 * domain), reserved names (import and export of the text file), OpenPGP keys (upload for any
 * address of a managed domain), API tokens and webhooks (a secret or token shown once and never
 * written to the audit log), the dashboard's figures per domain.
 */
describe("admin area: the actions of each page", () => {
  let service: TestService;
  let admin: WebClient;
  let domainAdmin: WebClient;

  before(async () => {
    service = await startService({ web: true });
    const { domains, users, aliases } = service.services;
    for (const name of ["example.org", "example.net", "spare.example"]) await domains.create(name);
    await users.create({ email: "admin@example.org", password, roles: ["ROLE_ADMIN"] });
    await users.create({ email: "da@example.net", password, roles: ["ROLE_DOMAIN_ADMIN"] });
    await users.create({ email: "erin@example.net", password });
    await users.create({ email: "frank@example.org", password });
    await users.create({ email: "gil@spare.example", password });
    await aliases.create({ source: "desk@spare.example", destinations: ["gil@spare.example"] });
    admin = new WebClient(service.url);
    domainAdmin = new WebClient(service.url);
    await admin.signIn("admin@example.org");
    await domainAdmin.signIn("da@example.net");
  });
  after(async () => {
    await service?.close();
  });

  test("a domain that holds users is deleted only by the force path, with the admin's password; never the admin's own", async () => {
    const confirm = await admin.get("/admin/domains/spare.example/delete");
    assert.equal(confirm.status, 200);
    assert.match(confirm.text, /Active users: 1/);
    assert.match(confirm.text, /Active aliases: 1/);
    const noForce = await admin.post("/admin/domains/spare.example/delete", { password });
    assert.equal(noForce.status, 409);
    assert.ok(fieldError(noForce.text, "force"));
    const wrongPassword = await admin.post("/admin/domains/spare.example/delete", {
      password: "not my password!",
      force: "yes",
    });
    assert.equal(wrongPassword.status, 422);
    assert.ok(await service.services.domains.find("spare.example"));
    const deleted = await admin.post("/admin/domains/spare.example/delete", { password, force: "yes" });
    assert.equal(deleted.status, 303);
    assert.equal(await service.services.domains.find("spare.example"), null);
    assert.equal(await service.services.users.findByEmail("gil@spare.example"), null, "gone with the domain");
    await admin.get("/admin/domains/example.org/delete");
    const own = await admin.post("/admin/domains/example.org/delete", { password, force: "yes" });
    assert.equal(own.status, 409);
    assert.ok(await service.services.domains.find("example.org"));
    const log = await service.services.database.db
      .selectFrom("audit_log")
      .selectAll()
      .where("action", "=", "domain.delete")
      .execute();
    assert.equal(log.length, 1);
    assert.deepEqual(JSON.parse(log[0]?.detail ?? "{}"), { force: true, activeUsers: 1, activeAliases: 1 });
  });

  test("invite codes: a domain admin creates them only for its domain and only while it invites", async () => {
    await domainAdmin.get("/admin/invite-codes");
    const closed = await domainAdmin.post("/admin/invite-codes", { owner: "erin@example.net", code: "" });
    assert.equal(closed.status, 403);
    assert.ok(fieldError(closed.text, "domain") ?? closed.text.includes("Invitations are off"));
    await service.services.domains.updateInvitations("example.net", { enabled: true, limit: 3 });
    const created = await domainAdmin.post("/admin/invite-codes", {
      owner: "erin@example.net",
      code: "abc23 def45 ghj67 kmn89",
      domain: "example.org",
    });
    assert.equal(created.status, 303);
    const code = await service.services.inviteCodes.find("ABC23-DEF45-GHJ67-KMN89");
    assert.equal(
      code?.domain,
      "example.net",
      "a domain admin's code is for its own domain, whatever was posted",
    );
    assert.equal(code?.owner, "erin@example.net");
    const foreignOwner = await domainAdmin.post("/admin/invite-codes", {
      owner: "frank@example.org",
      code: "",
    });
    assert.equal(foreignOwner.status, 403);
    const list = await domainAdmin.get("/admin/invite-codes");
    assert.ok(list.text.includes("ABC23-DEF45-GHJ67-KMN89"));
    // An admin's code for another domain is not in the domain admin's list, nor deletable by it.
    await admin.get("/admin/invite-codes");
    assert.equal(
      (
        await admin.post("/admin/invite-codes", {
          owner: "frank@example.org",
          domain: "example.org",
          code: "ZZZ99-ZZZ99-ZZZ99-ZZZ99",
        })
      ).status,
      303,
    );
    const orgCode = await service.services.inviteCodes.find("ZZZ99-ZZZ99-ZZZ99-ZZZ99");
    assert.ok(orgCode);
    assert.ok(!(await domainAdmin.get("/admin/invite-codes")).text.includes("ZZZ99-ZZZ99-ZZZ99-ZZZ99"));
    assert.equal((await domainAdmin.post(`/admin/invite-codes/${orgCode.id}/delete`)).status, 404);
    assert.ok(await service.services.inviteCodes.find("ZZZ99-ZZZ99-ZZZ99-ZZZ99"));
    assert.equal((await domainAdmin.post(`/admin/invite-codes/${code?.id}/delete`)).status, 303);
    assert.equal(await service.services.inviteCodes.find("ABC23-DEF45-GHJ67-KMN89"), null);
    const entries = await service.services.database.db
      .selectFrom("audit_log")
      .select(["target", "detail"])
      .where("action", "like", "invite-code.%")
      .execute();
    assert.ok(entries.length >= 3);
    for (const entry of entries) {
      assert.match(entry.target ?? "", /^invite-code:\d+$/);
      assert.ok(
        !JSON.stringify(entry).includes("ABC23-DEF45-GHJ67-KMN89") &&
          !JSON.stringify(entry).includes("ZZZ99-ZZZ99-ZZZ99-ZZZ99"),
        "never the code",
      );
    }
  });

  test("paged lists link the next and previous page with their filters", async () => {
    for (let i = 0; i < 25; i++)
      await service.services.reservedNames.create(`pager${String(i).padStart(2, "0")}`);
    const first = await admin.get("/admin/reserved-names?search=pager");
    assert.match(first.text, /href="\/admin\/reserved-names\?search=pager&amp;page=2" rel="next"/);
    assert.doesNotMatch(first.text, /rel="prev"/);
    const second = await admin.get("/admin/reserved-names?search=pager&page=2");
    assert.match(second.text, /href="\/admin\/reserved-names\?search=pager&amp;page=1" rel="prev"/);
    assert.doesNotMatch(second.text, /rel="next"/);
    const unfiltered = await admin.get("/admin/audit-log?page=1");
    assert.equal(unfiltered.status, 200);
    // The other tests count the reserved names.
    for (let i = 0; i < 25; i++)
      await service.services.reservedNames.delete(`pager${String(i).padStart(2, "0")}`);
  });

  test("reserved names: created, imported from a text file with its counts, exported sorted", async () => {
    await admin.get("/admin/reserved-names");
    assert.equal((await admin.post("/admin/reserved-names", { name: "Webmaster" })).status, 303);
    assert.equal((await admin.post("/admin/reserved-names", { name: "webmaster" })).status, 409);
    await admin.get("/admin/reserved-names");
    const answer = await admin.postMultipart(
      "/admin/reserved-names/import",
      {},
      {
        name: "file",
        filename: "names.txt",
        text: "# names\nhostmaster\n\nwebmaster\nnot a name\nsecurity\n",
      },
    );
    assert.equal(answer.status, 303, answer.text);
    const after = await admin.get("/admin/reserved-names");
    assert.match(after.text, /Names imported: 2\. Already reserved: 1\. Lines that were no names: 1\./);
    const exported = await admin.get("/admin/reserved-names/export");
    assert.equal(exported.status, 200);
    assert.equal(exported.text, "abuse\nhostmaster\npostmaster\nsecurity\nwebmaster\n");
  });

  test("OpenPGP keys: uploaded for any address of a domain the actor manages, listed, deleted", async () => {
    const { publicKey } = await openpgp.generateKey({
      userIDs: [{ email: "erin@example.net" }],
      format: "armored",
    });
    await domainAdmin.get("/admin/openpgp-keys");
    const uploaded = await domainAdmin.post("/admin/openpgp-keys", {
      email: "erin@example.net",
      keyText: publicKey,
    });
    assert.equal(uploaded.status, 303);
    assert.equal((await service.services.openPgpKeys.get("erin@example.net")).email, "erin@example.net");
    const { publicKey: frankKey } = await openpgp.generateKey({
      userIDs: [{ email: "frank@example.org" }],
      format: "armored",
    });
    const foreign = await domainAdmin.post("/admin/openpgp-keys", {
      email: "frank@example.org",
      keyText: frankKey,
    });
    assert.equal(foreign.status, 403);
    await assert.rejects(service.services.openPgpKeys.get("frank@example.org"));
    const wrong = await domainAdmin.post("/admin/openpgp-keys", {
      email: "da@example.net",
      keyText: publicKey,
    });
    assert.equal(wrong.status, 422);
    assert.match(fieldError(wrong.text, "keyText") ?? "", /No key for \S+ found in the uploaded data/);
    const neither = await domainAdmin.post("/admin/openpgp-keys", { email: "erin@example.net", keyText: "" });
    assert.equal(neither.status, 422);
    assert.ok((await domainAdmin.get("/admin/openpgp-keys")).text.includes("erin@example.net"));
    assert.equal((await domainAdmin.post("/admin/openpgp-keys/erin%40example.net/delete")).status, 303);
    await assert.rejects(service.services.openPgpKeys.get("erin@example.net"));
  });

  test("an API token and a webhook secret are shown once on the page and never written to the audit log", async () => {
    await admin.get("/admin/api-tokens");
    const created = await admin.post("/admin/api-tokens", { name: "janitor", scopes: ["retention"] });
    assert.equal(created.status, 200);
    const token = /<code id="api-token">([0-9a-f]{64})<\/code>/.exec(created.text)?.[1];
    assert.ok(token);
    assert.equal((await service.request("GET", "/api/retention/users", { token })).status < 400, true);
    assert.ok(!(await admin.get("/admin/api-tokens")).text.includes(token));
    await admin.get("/admin/webhooks/new");
    const hook = await admin.post("/admin/webhooks/new", {
      url: "https://hooks.example.net/in",
      events: ["user.deleted", "user.created"],
      secret: "",
      enabled: "yes",
    });
    assert.equal(hook.status, 200);
    const secret = /<code id="webhook-secret">([^<]+)<\/code>/.exec(hook.text)?.[1];
    assert.ok(secret && secret.length === 64);
    const endpoint = (await service.services.webhooks.list()).find(
      (e) => e.url === "https://hooks.example.net/in",
    );
    assert.deepEqual(endpoint?.events, ["user.deleted", "user.created"]);
    const edit = await admin.get(`/admin/webhooks/${endpoint?.id}/edit`);
    assert.ok(!edit.text.includes(secret), "the edit form does not show the secret");
    const badEdit = await admin.post(`/admin/webhooks/${endpoint?.id}/edit`, {
      url: "ftp://x",
      events: [],
      secret: "short",
    });
    assert.equal(badEdit.status, 422);
    const rows = await service.services.database.db.selectFrom("audit_log").select("detail").execute();
    const text = JSON.stringify(rows);
    assert.ok(!text.includes(token) && !text.includes(secret));
    await admin.get(`/admin/api-tokens`);
    const id = (await service.services.tokens.list()).find((t) => t.name === "janitor")?.id;
    await admin.get(`/admin/api-tokens/${id}/delete`);
    assert.equal((await admin.post(`/admin/api-tokens/${id}/delete`)).status, 303);
    assert.equal((await service.request("GET", "/api/retention/users", { token })).status, 401);
  });

  test("the dashboard counts the domain admin's domain only; admins see the installation and the webhook backlog", async () => {
    const own = await domainAdmin.get("/admin");
    assert.equal(own.status, 200);
    const figure = (html: string, label: string) =>
      Number(new RegExp(`<span class="figure">(\\d+)</span> ${label}`).exec(html)?.[1] ?? Number.NaN);
    assert.equal(figure(own.text, "Active users"), 2, "da and erin");
    assert.ok(!own.text.includes("Webhook deliveries"));
    const all = await admin.get("/admin");
    assert.equal(figure(all.text, "Active users"), 4);
    assert.equal(figure(all.text, "Domains"), 2);
    assert.ok(Number.isFinite(figure(all.text, "Webhook deliveries waiting")));
    assert.match(all.text, /<svg viewBox="0 0 720 260" role="img"/);
  });
});
