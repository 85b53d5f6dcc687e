import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { currentTotpCode } from "../src/credentials/totp.ts";
import { password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";
import { fieldError, WebClient } from "./helpers/web-client.ts";

/**
 * App passwords over HTTP on the database TEST_DATABASE_URL names (SQLite by default): the
 * account page (create with re-confirmation, shown once, list, revoke, the switch "mail apps must
 * use app passwords"), the offer on the two-factor page, the admin API and the admin pages (the
 * reach rule, the audit log). Each created app password is tried at the mailbox server's passdb,
 * where it has to work, and a revoked one has to stop working.
 */
const grouped = /^[a-z2-9]{4}(-[a-z2-9]{4}){3}$/;
const shown = (html: string) => /<code id="app-password">([^<]*)<\/code>/.exec(html)?.[1] ?? "";

describe("app passwords: the account page, the admin API and the admin pages", () => {
  let service: TestService;
  let admin: string;
  let mailbox: string;

  const userOf = (email: string) => service.services.users.get(email);
  const listOf = async (email: string) => service.services.appPasswords.list(await userOf(email));
  const passdb = (email: string, secret: string) =>
    service.request("POST", `/api/mailbox-server/${encodeURIComponent(email)}`, {
      token: mailbox,
      json: { password: secret },
      headers: { "x-client-address": "198.51.100.7" },
    });
  const api = (method: string, path: string, json?: unknown) =>
    service.request(method, path, { token: admin, ...(json === undefined ? {} : { json }) });
  const auditActions = async (target: string) =>
    (
      await service.services.database.db
        .selectFrom("audit_log")
        .select(["action", "detail"])
        .where("target", "=", target)
        .orderBy("id")
        .execute()
    ).map((row) => ({ action: row.action, detail: row.detail === null ? null : JSON.parse(row.detail) }));
  const eventTypes = async (email: string) =>
    (
      await service.services.database.db
        .selectFrom("security_events")
        .select("type")
        .where("email", "=", email)
        .orderBy("id")
        .execute()
    )
      .map((row) => row.type)
      .filter((type) => type.startsWith("app_password"));

  before(async () => {
    service = await startService({ web: true });
    const { domains, users } = service.services;
    await domains.create("example.org");
    await domains.create("example.net");
    await users.create({ email: "alice@example.org", password, mailCrypt: true });
    for (const local of ["bob", "dave", "erin", "tf", "tf2"])
      await users.create({ email: `${local}@example.org`, password, mailCrypt: false });
    await users.create({ email: "carol@example.net", password, mailCrypt: false });
    await users.create({ email: "root@example.org", password, mailCrypt: false, roles: ["ROLE_ADMIN"] });
    await users.create({
      email: "da@example.org",
      password,
      mailCrypt: false,
      roles: ["ROLE_DOMAIN_ADMIN"],
    });
    admin = await service.token("admin");
    mailbox = await service.token("mailbox-server");
  });
  after(async () => {
    await service?.close();
  });

  test("creating is refused, with the reason next to the field and nothing created, for a bad form", async () => {
    const web = new WebClient(service.url);
    await web.signIn("alice@example.org");
    const page = await web.get("/account/app-passwords");
    assert.equal(page.status, 200);
    assert.match(page.text, /id="field-scope-mail"[^>]* checked/);
    const wrong = await web.post("/account/app-passwords", {
      name: "Phone",
      scope: "mail",
      password: "not the password at all",
    });
    assert.equal(wrong.status, 422);
    assert.ok(fieldError(wrong.text, "password"), "the wrong password is named");
    assert.match(wrong.text, /value="Phone"/, "the name is kept");
    for (const [form, field] of [
      [{ name: "", scope: "mail" }, "name"],
      [{ name: "   ", scope: "mail" }, "name"],
      [{ name: "x".repeat(65), scope: "mail" }, "name"],
      [{ name: "Pho\u0007ne", scope: "mail" }, "name"],
      [{ name: "Phone", scope: "imap" }, "scope"],
      [{ name: "Phone" }, "scope"],
    ] as const) {
      const answer = await web.post("/account/app-passwords", { ...form, password });
      assert.equal(answer.status, 422, JSON.stringify(form));
      assert.ok(fieldError(answer.text, field), `${JSON.stringify(form)}: ${field}`);
    }
    // A NUL byte is refused at the edge (src/http/params.ts) for every form: 400, nothing read.
    const nul = await web.post("/account/app-passwords", { name: "Pho\u0000ne", scope: "mail", password });
    assert.equal(nul.status, 400);
    const blank = await web.post("/account/app-passwords", { name: "Phone", scope: "mail", password: "" });
    assert.equal(blank.status, 422);
    assert.ok(fieldError(blank.text, "password"));
    // Without the form's CSRF token: refused before anything is read.
    const forged = await web.request("POST", "/account/app-passwords", {
      name: "Phone",
      scope: "mail",
      password,
    });
    assert.equal(forged.status, 403);
    assert.deepEqual(await listOf("alice@example.org"), []);
    assert.deepEqual(await eventTypes("alice@example.org"), []);
  });

  test("a new app password is shown once, opens the encrypted mailbox, and is listed without its value", async () => {
    const web = new WebClient(service.url);
    await web.signIn("alice@example.org");
    await web.get("/account/app-passwords");
    const made = await web.post("/account/app-passwords", { name: "Phone", scope: "mail", password });
    assert.equal(made.status, 200);
    const value = shown(made.text);
    assert.match(value, grouped);
    assert.match(made.text, /dashes are optional/);
    // Any case, with or without the dashes: the mailbox server takes it, and opens the key.
    const opened = await passdb("alice@example.org", value.replaceAll("-", "").toUpperCase());
    assert.equal(opened.status, 200, opened.text);
    const withPassword = await passdb("alice@example.org", password);
    assert.equal(withPassword.status, 200);
    assert.deepEqual(
      opened.body,
      withPassword.body,
      "the same answer (the same private key) as the password",
    );
    // The acknowledgement: missing, the page again with the value; given, back to the list.
    const noAck = await web.post("/account/app-passwords/ack", { password: value, name: "Phone" });
    assert.equal(noAck.status, 422);
    assert.ok(fieldError(noAck.text, "ack"));
    assert.equal(shown(noAck.text), value);
    const forgedAck = await web.post("/account/app-passwords/ack", { password: "<b>not one</b>", name: "x" });
    assert.equal(shown(forgedAck.text), "", "only a value of the app-password form is shown again");
    const ack = await web.post("/account/app-passwords/ack", { ack: "yes", password: value, name: "Phone" });
    assert.equal(ack.status, 303);
    assert.equal(ack.location, "/account/app-passwords");
    const list = await web.get("/account/app-passwords");
    assert.match(list.text, /<td>Phone<\/td>/);
    assert.match(list.text, /Mail \(IMAP, SMTP\)/);
    assert.ok(
      !list.text.includes(value) && !list.text.includes(value.replaceAll("-", "")),
      "never the value",
    );
    // Used once at the mailbox server: "last used" has a day and the client's address.
    assert.match(list.text, /from 198\.51\.100\.7/);
    const [item] = await listOf("alice@example.org");
    assert.equal(item?.name, "Phone");
    assert.equal(item?.scope, "mail");
    assert.deepEqual(await eventTypes("alice@example.org"), ["app_password.created"]);
    // A second one, SMTP only: it cannot open the mailbox.
    const smtp = await web.post("/account/app-passwords", { name: "Printer", scope: "smtp", password });
    assert.equal(smtp.status, 200);
    assert.equal((await passdb("alice@example.org", shown(smtp.text))).status, 401);
    const both = await web.get("/account/app-passwords");
    assert.match(both.text, /Sending only \(SMTP\)/);
    assert.match(both.text, /Never/);
  });

  test("revoking: the user's own only (404 otherwise, nothing changes), with the CSRF token, at once", async () => {
    const bob = new WebClient(service.url);
    await bob.signIn("bob@example.org");
    await bob.get("/account/app-passwords");
    const made = await bob.post("/account/app-passwords", { name: "Laptop", scope: "mail", password });
    const value = shown(made.text);
    assert.equal((await passdb("bob@example.org", value)).status, 200);
    const [bobs] = await listOf("bob@example.org");
    assert.ok(bobs);
    const alice = new WebClient(service.url);
    await alice.signIn("alice@example.org");
    await alice.get("/account/app-passwords");
    const foreign = await alice.post(`/account/app-passwords/${bobs.id}/revoke`);
    assert.equal(foreign.status, 404);
    for (const id of ["abc", "0", "99999999999"])
      assert.equal((await alice.post(`/account/app-passwords/${id}/revoke`)).status, 404, id);
    assert.equal((await listOf("bob@example.org")).length, 1);
    assert.equal((await passdb("bob@example.org", value)).status, 200);
    const forged = await bob.request("POST", `/account/app-passwords/${bobs.id}/revoke`, {});
    assert.equal(forged.status, 403);
    assert.equal((await listOf("bob@example.org")).length, 1);
    await bob.get("/account/app-passwords");
    const revoked = await bob.post(`/account/app-passwords/${bobs.id}/revoke`);
    assert.equal(revoked.status, 303);
    const after = await bob.get("/account/app-passwords");
    assert.match(after.text, /Laptop.* is revoked/);
    assert.match(after.text, /id="app-passwords-none"/);
    assert.deepEqual(await listOf("bob@example.org"), []);
    assert.equal((await passdb("bob@example.org", value)).status, 401);
    assert.deepEqual(await eventTypes("bob@example.org"), ["app_password.created", "app_password.removed"]);
  });

  test('"mail apps must use app passwords": the switch shows the effective value and sets it', async () => {
    const web = new WebClient(service.url);
    await web.signIn("dave@example.org");
    const page = await web.get("/account/app-passwords");
    assert.doesNotMatch(page.text, /id="field-required"[^>]* checked/);
    assert.equal((await passdb("dave@example.org", password)).status, 200);
    const on = await web.post("/account/app-passwords/required", { required: "yes" });
    assert.equal(on.status, 303);
    assert.equal((await userOf("dave@example.org")).appPasswordsRequired, true);
    assert.match((await web.get("/account/app-passwords")).text, /id="field-required"[^>]* checked/);
    // The account password no longer opens the mailbox, and the owner's activity says why.
    assert.equal((await passdb("dave@example.org", password)).status, 401);
    assert.match((await web.get("/account/activity")).text, /mail apps must use an app password/);
    const forged = await web.request("POST", "/account/app-passwords/required", {});
    assert.equal(forged.status, 403);
    assert.equal((await userOf("dave@example.org")).appPasswordsRequired, true);
    await web.get("/account/app-passwords");
    await web.post("/account/app-passwords/required", {});
    assert.equal((await userOf("dave@example.org")).appPasswordsRequired, false);
    assert.equal((await passdb("dave@example.org", password)).status, 200);
    // The domain's default shows for a user without a choice of their own (erin), not for dave.
    assert.equal(
      (await api("PATCH", "/api/admin/domains/example.org", { appPasswordsRequired: true })).status,
      200,
    );
    const erin = new WebClient(service.url);
    await erin.signIn("erin@example.org");
    assert.match((await erin.get("/account/app-passwords")).text, /id="field-required"[^>]* checked/);
    assert.doesNotMatch((await web.get("/account/app-passwords")).text, /id="field-required"[^>]* checked/);
    assert.equal(
      (await api("PATCH", "/api/admin/domains/example.org", { appPasswordsRequired: false })).status,
      200,
    );
    const events = await service.services.database.db
      .selectFrom("security_events")
      .select("detail")
      .where("email", "=", "dave@example.org")
      .where("type", "=", "app_passwords.required_changed")
      .orderBy("id")
      .execute();
    assert.deepEqual(
      events.map((e) => JSON.parse(e.detail ?? "{}").setting),
      ["on", "off"],
    );
  });

  test("switching two-factor on offers the switch, checked, and applies it only when it stays checked", async () => {
    for (const [email, keep] of [
      ["tf@example.org", true],
      ["tf2@example.org", false],
    ] as const) {
      const web = new WebClient(service.url);
      await web.signIn(email);
      await web.get("/account/twofactor");
      await web.post("/account/twofactor/enable", { password });
      const scan = await web.get("/account/twofactor/confirm");
      assert.match(scan.text, /id="field-appPasswordsRequired"[^>]* checked/);
      const secret = /<code id="totp-secret">([^<]+)<\/code>/.exec(scan.text)?.[1]?.replace(/\s+/g, "") ?? "";
      // A wrong code: the page again, the box as it was sent, nothing switched.
      const wrong = await web.post("/account/twofactor/confirm", {
        code: "000000",
        ...(keep ? { appPasswordsRequired: "yes" } : {}),
      });
      assert.equal(wrong.status, 422);
      assert.equal(/id="field-appPasswordsRequired"[^>]* checked/.test(wrong.text), keep);
      assert.equal((await userOf(email)).appPasswordsRequired, null);
      const done = await web.post("/account/twofactor/confirm", {
        code: currentTotpCode(secret, Date.now()),
        ...(keep ? { appPasswordsRequired: "yes" } : {}),
      });
      assert.equal(done.status, 200);
      assert.equal((await userOf(email)).appPasswordsRequired, keep ? true : null, email);
    }
  });

  test("admin API: list without values, create (201, once), needs_owner, refusals, revoke, audited", async () => {
    const listed = await api("GET", "/api/admin/users/alice%40example.org/app-passwords");
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.items.map((i: { name: string; scope: string }) => [i.name, i.scope]),
      [
        ["Phone", "mail"],
        ["Printer", "smtp"],
      ],
    );
    for (const item of listed.body.items)
      assert.deepEqual(Object.keys(item), [
        "id",
        "name",
        "scope",
        "createdAt",
        "lastUsedAt",
        "lastUsedAddress",
      ]);
    const encrypted = await api("POST", "/api/admin/users/alice%40example.org/app-passwords", {
      name: "Phone 2",
      scope: "mail",
    });
    assert.equal(encrypted.status, 409);
    assert.match(encrypted.body.message, /only its owner/);
    const made = await api("POST", "/api/admin/users/alice%40example.org/app-passwords", {
      name: "Scanner",
      scope: "smtp",
    });
    assert.equal(made.status, 201);
    assert.deepEqual(Object.keys(made.body), ["id", "name", "scope", "password"]);
    assert.equal(made.body.name, "Scanner");
    assert.equal(made.body.scope, "smtp");
    assert.match(made.body.password, grouped);
    const forBob = await api("POST", "/api/admin/users/bob%40example.org/app-passwords", {
      name: "Tablet",
      scope: "mail",
    });
    assert.equal(forBob.status, 201, "without MailCrypt keys an admin may make one for mail");
    assert.equal((await passdb("bob@example.org", forBob.body.password)).status, 200);
    for (const body of [
      { name: "", scope: "smtp" },
      { name: "x".repeat(65), scope: "smtp" },
      { name: "a\u0007b", scope: "smtp" },
      { name: "Ok", scope: "imap" },
      { name: "Ok" },
      { scope: "smtp" },
      { name: 5, scope: "smtp" },
    ]) {
      const refused = await api("POST", "/api/admin/users/bob%40example.org/app-passwords", body);
      assert.equal(refused.status, 422, JSON.stringify(body));
      // The messages the OpenAPI document lists.
      if (body.scope === "imap") assert.equal(refused.body.message, "scope: must be mail or smtp");
      if (body.name === "")
        assert.equal(refused.body.message, "name: give the device a name of 1 to 64 characters");
    }
    const nul = await api("POST", "/api/admin/users/bob%40example.org/app-passwords", {
      name: "a\u0000b",
      scope: "smtp",
    });
    assert.equal(nul.status, 400);
    assert.equal(
      (await api("POST", "/api/admin/users/nobody%40example.org/app-passwords", { name: "x", scope: "smtp" }))
        .status,
      404,
    );
    assert.equal((await listOf("bob@example.org")).length, 1);
    // Another user's id under this address: 404, and it stays.
    const foreign = await api("DELETE", `/api/admin/users/bob%40example.org/app-passwords/${made.body.id}`);
    assert.equal(foreign.status, 404);
    assert.equal((await listOf("alice@example.org")).length, 3);
    assert.equal((await api("DELETE", "/api/admin/users/bob%40example.org/app-passwords/x1")).status, 400);
    const revoked = await api("DELETE", `/api/admin/users/alice%40example.org/app-passwords/${made.body.id}`);
    assert.equal(revoked.status, 204);
    assert.equal((await listOf("alice@example.org")).length, 2);
    const audit = await auditActions("alice@example.org");
    assert.deepEqual(
      audit.map((a) => a.action),
      ["user.app-password.create", "user.app-password.revoke"],
    );
    assert.deepEqual(audit[0]?.detail, { id: made.body.id, scope: "smtp" });
    assert.ok(!JSON.stringify(audit).includes(made.body.password.slice(0, 9)), "never the value");
    // The owner's security events name the admin's change, by its actor.
    const events = await service.services.database.db
      .selectFrom("security_events")
      .select(["type", "actor", "door"])
      .where("email", "=", "alice@example.org")
      .where("type", "like", "app_password%")
      .orderBy("id")
      .execute();
    assert.deepEqual(events.slice(-2), [
      { type: "app_password.created", actor: "api-token:test token", door: "admin_api" },
      { type: "app_password.removed", actor: "api-token:test token", door: "admin_api" },
    ]);
  });

  test("admin API: appPasswordsRequired on the user (true, false, null; bad values refused) and the domain", async () => {
    const path = "/api/admin/users/erin%40example.org";
    assert.equal((await api("GET", path)).body.appPasswordsRequired, null);
    for (const value of [true, false, null]) {
      const answer = await api("PATCH", path, { appPasswordsRequired: value });
      assert.equal(answer.status, 200);
      assert.equal(answer.body.appPasswordsRequired, value);
      assert.equal((await userOf("erin@example.org")).appPasswordsRequired, value);
    }
    for (const value of ["yes", 1, "true", [], {}]) {
      const answer = await api("PATCH", path, { appPasswordsRequired: value, quota: 5 });
      assert.equal(answer.status, 422, JSON.stringify(value));
      assert.equal(answer.body.message, "appPasswordsRequired: must be true or false, or null");
    }
    const user = await userOf("erin@example.org");
    assert.equal(user.appPasswordsRequired, null);
    assert.equal(user.quota, null, "a refused patch changes nothing");
    const audit = (await auditActions("erin@example.org")).filter((a) => a.action === "user.update");
    assert.deepEqual(
      audit.map((a) => a.detail.appPasswordsRequired),
      [
        { from: null, to: true },
        { from: true, to: false },
        { from: false, to: null },
      ],
    );
    // The domain: false by default, set and read back, audited; a bad value refused.
    assert.equal((await api("GET", "/api/admin/domains/example.net")).body.appPasswordsRequired, false);
    const on = await api("PATCH", "/api/admin/domains/example.net", { appPasswordsRequired: true });
    assert.equal(on.status, 200);
    assert.equal(on.body.appPasswordsRequired, true);
    assert.equal(on.body.activeUsers, 1);
    assert.equal(await service.services.appPasswords.required(await userOf("carol@example.net")), true);
    for (const value of [null, "yes", 0]) {
      const refused = await api("PATCH", "/api/admin/domains/example.net", { appPasswordsRequired: value });
      assert.equal(refused.status, 422);
      assert.equal(refused.body.message, "appPasswordsRequired: must be true or false");
    }
    assert.equal(
      (await api("PATCH", "/api/admin/domains/example.net", { appPasswordsRequired: false })).status,
      200,
    );
    const domainAudit = (await auditActions("example.net")).filter((a) => a.action === "domain.update");
    assert.deepEqual(
      domainAudit.map((a) => a.detail),
      [
        { appPasswordsRequired: { from: false, to: true } },
        { appPasswordsRequired: { from: true, to: false } },
      ],
    );
  });

  test("admin pages: the list with Revoke and the setting; a domain admin only within its domain", async () => {
    const carolMade = await api("POST", "/api/admin/users/carol%40example.net/app-passwords", {
      name: "Carol's phone",
      scope: "smtp",
    });
    const bobItems = await listOf("bob@example.org");
    const bobs = bobItems[0];
    assert.ok(bobs);
    const da = new WebClient(service.url);
    await da.signIn("da@example.org");
    // Outside its domain: 403 on the page and on each form, and nothing changes.
    assert.equal((await da.get("/admin/users/carol%40example.net")).status, 403);
    await da.get("/admin/users/bob%40example.org");
    const foreignRevoke = await da.post(
      `/admin/users/carol%40example.net/app-passwords/${carolMade.body.id}/revoke`,
    );
    assert.equal(foreignRevoke.status, 403);
    const foreignSetting = await da.post("/admin/users/carol%40example.net/app-passwords-required", {
      appPasswordsRequired: "on",
    });
    assert.equal(foreignSetting.status, 403);
    assert.equal(
      (await da.post("/admin/domains/example.net/app-passwords", { appPasswordsRequired: "yes" })).status,
      403,
    );
    assert.equal((await listOf("carol@example.net")).length, 1);
    assert.equal((await userOf("carol@example.net")).appPasswordsRequired, null);
    assert.equal(
      await service.services.domains.appPasswordsRequired((await userOf("carol@example.net")).domainId),
      false,
    );
    // Another user's id under bob's address: 404.
    await da.get("/admin/users/bob%40example.org");
    const mixed = await da.post(`/admin/users/bob%40example.org/app-passwords/${carolMade.body.id}/revoke`);
    assert.equal(mixed.status, 404);
    assert.equal((await listOf("carol@example.net")).length, 1);
    // Within: the list, the setting (on, off, domain default), a bad setting refused next to the field.
    const page = await da.get("/admin/users/bob%40example.org");
    assert.equal(page.status, 200);
    assert.match(page.text, /<td>Tablet<\/td>/);
    assert.match(page.text, /id="field-appPasswordsRequired-default"[^>]* checked/);
    const bad = await da.post("/admin/users/bob%40example.org/app-passwords-required", {
      appPasswordsRequired: "maybe",
    });
    assert.equal(bad.status, 422);
    assert.ok(fieldError(bad.text, "appPasswordsRequired"));
    for (const [setting, value] of [
      ["on", true],
      ["off", false],
      ["default", null],
    ] as const) {
      const saved = await da.post("/admin/users/bob%40example.org/app-passwords-required", {
        appPasswordsRequired: setting,
      });
      assert.equal(saved.status, 303);
      assert.equal((await userOf("bob@example.org")).appPasswordsRequired, value);
      await da.get("/admin/users/bob%40example.org");
    }
    const revoked = await da.post(`/admin/users/bob%40example.org/app-passwords/${bobs.id}/revoke`);
    assert.equal(revoked.status, 303);
    assert.deepEqual(await listOf("bob@example.org"), []);
    const audit = await auditActions("bob@example.org");
    assert.ok(audit.some((a) => a.action === "user.app-password.revoke" && a.detail.id === bobs.id));
    assert.equal(audit.filter((a) => a.action === "user.update").length, 3);
    const changed = await service.services.database.db
      .selectFrom("security_events")
      .select(["detail", "actor"])
      .where("email", "=", "bob@example.org")
      .where("type", "=", "app_passwords.required_changed")
      .orderBy("id")
      .execute();
    assert.deepEqual(
      changed.map((e) => [JSON.parse(e.detail ?? "{}").setting, e.actor]),
      [
        ["on", "da@example.org"],
        ["off", "da@example.org"],
        ["domain_default", "da@example.org"],
      ],
    );
    // Its own domain's default, on the domain page.
    const domainPage = await da.get("/admin/domains/example.org");
    assert.equal(domainPage.status, 200);
    assert.doesNotMatch(domainPage.text, /id="field-appPasswordsRequired"[^>]* checked/);
    assert.equal(
      (await da.post("/admin/domains/example.org/app-passwords", { appPasswordsRequired: "yes" })).status,
      303,
    );
    assert.match(
      (await da.get("/admin/domains/example.org")).text,
      /id="field-appPasswordsRequired"[^>]* checked/,
    );
    await da.post("/admin/domains/example.org/app-passwords", {});
    assert.equal(
      await service.services.domains.appPasswordsRequired((await userOf("bob@example.org")).domainId),
      false,
    );
    // An admin revokes carol's on the page.
    const root = new WebClient(service.url);
    await root.signIn("root@example.org");
    assert.match(
      (await root.get("/admin/users/carol%40example.net")).text,
      /Carol&#39;s phone|Carol's phone/,
    );
    const done = await root.post(
      `/admin/users/carol%40example.net/app-passwords/${carolMade.body.id}/revoke`,
    );
    assert.equal(done.status, 303);
    assert.deepEqual(await listOf("carol@example.net"), []);
  });
});
