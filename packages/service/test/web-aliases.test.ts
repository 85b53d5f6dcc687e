import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as openpgp from "openpgp";
import type { UserAliasService } from "../src/accounts/user-aliases.ts";
import type { User } from "../src/accounts/users.ts";
import { flag } from "../src/db/schema.ts";
import { ServiceError } from "../src/errors.ts";
import { byTest, password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

/**
 * The rules of the user's own aliases (UserAliasService, reference 5.6 and 13.16) on the database
 * TEST_DATABASE_URL names (SQLite by default; CI runs it on PostgreSQL and MariaDB too), and the
 * page's answers to them over HTTP.
 */

/** The rule an own-alias refusal names: `own_alias.taken` -> `taken`. */
const ownAliasReason = (error: ServiceError): string => error.code.replace(/^own_alias\./, "");

async function reason(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ServiceError) return ownAliasReason(error);
    throw error;
  }
  assert.fail("expected a refusal");
}

/** Cookies, no redirects followed, the CSRF token of the last page seen. */
class WebClient {
  readonly #url: string;
  readonly #cookies = new Map<string, string>();
  #csrf = "";

  constructor(url: string) {
    this.#url = url;
  }

  async request(method: string, path: string, form?: Record<string, string>) {
    const headers: Record<string, string> = {};
    if (this.#cookies.size > 0)
      headers.cookie = [...this.#cookies].map(([name, value]) => `${name}=${value}`).join("; ");
    if (form) headers["content-type"] = "application/x-www-form-urlencoded";
    const response = await fetch(`${this.#url}${path}`, {
      method,
      headers,
      redirect: "manual",
      body: form ? new URLSearchParams(form).toString() : undefined,
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair = ""] = line.split(";");
      const [name = "", value = ""] = pair.split("=");
      if (value === "") this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
    const text = await response.text();
    const token = /name="_csrf" value="([^"]+)"/.exec(text)?.[1];
    if (token) this.#csrf = token;
    return { status: response.status, location: response.headers.get("location"), text };
  }

  get(path: string) {
    return this.request("GET", path);
  }

  post(path: string, form: Record<string, string>, options: { csrf?: boolean } = {}) {
    return this.request("POST", path, options.csrf === false ? form : { _csrf: this.#csrf, ...form });
  }

  async signIn(email: string) {
    await this.get("/login");
    const answer = await this.post("/login", { email, password });
    assert.equal(answer.location, "/account", `${email} signed in`);
  }
}

/** The error shown next to a field of an answered form. */
const fieldError = (html: string, field: string) =>
  new RegExp(`<p class="error" id="field-${field}-error">([^<]*)</p>`).exec(html)?.[1] ?? null;

describe("the user's aliases: rules and the page's answers", () => {
  let service: TestService;
  let aliases: UserAliasService;
  let mta: string;
  const users: Record<string, User> = {};

  before(async () => {
    // An SMTP relay is configured (never reached: no worker runs), so e-mail goes to the outbox.
    service = await startService({ web: true, serviceOptions: { smtpUrl: "smtp://127.0.0.1:9" } });
    aliases = service.services.userAliases;
    mta = await service.token("mta");
    const { domains, users: accounts, aliases: adminAliases, database } = service.services;
    await domains.create("example.org");
    await domains.create("example.com");
    for (const local of ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "gone"])
      users[local] = (
        await accounts.create({ email: `${local}@example.org`, password, mailCrypt: false })
      ).user;
    users.admin = (
      await accounts.create({
        email: "admin@example.org",
        password,
        mailCrypt: false,
        roles: ["ROLE_DOMAIN_ADMIN"],
      })
    ).user;
    users.spam = (
      await accounts.create({ email: "spam@example.org", password, mailCrypt: false, roles: ["ROLE_SPAM"] })
    ).user;
    users.other = (await accounts.create({ email: "other@example.com", password, mailCrypt: false })).user;
    await service.services.lifecycle.delete("gone@example.org", byTest);
    await adminAliases.create({ source: "old-team@example.org", destinations: ["bob@example.org"] });
    await service.services.lifecycle.deleteAlias("old-team@example.org");
    await adminAliases.create({ source: "team@example.org", destinations: ["bob@example.org"] });
    await service.services.reservedNames.create("webmaster");
    // A cross-domain alias an administrator gave carol: listed with hers and counted as custom.
    await adminAliases.create({ source: "carol@example.com", owner: "carol@example.org" });
    await database.db.deleteFrom("mail_outbox").execute();
  });
  after(() => service.close());

  test("a random alias: 24 of [0-9a-z] at the user's domain, to the user, the note trimmed; it resolves at once", async () => {
    const alias = await aliases.createRandom(users.alice!, "  for the shop  ");
    assert.match(alias.source, /^[0-9a-z]{24}@example\.org$/);
    assert.equal(alias.random, true);
    assert.equal(alias.note, "for the shop");
    assert.equal(alias.deletable, true);
    const row = await service.services.database.db
      .selectFrom("aliases")
      .selectAll()
      .where("source", "=", alias.source)
      .executeTakeFirstOrThrow();
    assert.deepEqual(JSON.parse(row.destinations), ["alice@example.org"]);
    assert.equal(row.user_id, users.alice!.id);
    const lookup = await service.request("GET", `/api/mta/alias/${alias.source}`, { token: mta });
    assert.deepEqual(lookup.body, ["alice@example.org"]);
    const senders = await service.request("GET", `/api/mta/senders/${alias.source}`, { token: mta });
    assert.deepEqual(senders.body, ["alice@example.org"]);
    assert.equal((await aliases.createRandom(users.alice!, "   ")).note, null);
    assert.equal((await aliases.createRandom(users.alice!, "ä".repeat(40))).note, "ä".repeat(40));
    assert.equal(await reason(aliases.createRandom(users.alice!, "x".repeat(41))), "note_too_long");
  });

  test("'alias created' is written to the e-mail outbox in the creating transaction, in the creator's language", async () => {
    const { db } = service.services.database;
    await db.deleteFrom("mail_outbox").execute();
    const random = await aliases.createRandom(users.frank!, null, { locale: "de" });
    const custom = await aliases.createCustom(users.frank!, "frank.news");
    const mails = await db.selectFrom("mail_outbox").selectAll().orderBy("subject").execute();
    assert.deepEqual(
      mails.map((mail) => [mail.recipient, mail.subject]),
      [
        ["frank@example.org", "Neue Alias-Adresse angelegt"],
        ["frank@example.org", "New alias address created"],
      ],
    );
    assert.ok(mails[0]!.body.includes(random.source), "the German one names the random alias");
    assert.ok(mails[1]!.body.includes(custom.source));
    // A refused creation writes nothing.
    await reason(aliases.createCustom(users.frank!, "postmaster"));
    assert.equal((await db.selectFrom("mail_outbox").select("id").execute()).length, 2);
  });

  test("fewer than 100 active random aliases: the 101st is refused, deleted ones do not count", async () => {
    const { db } = service.services.database;
    const now = Math.floor(Date.now() / 1000);
    await db
      .insertInto("aliases")
      .values(
        Array.from({ length: 99 }, (_, i) => ({
          source: `bulk${i}@example.org`,
          domain_id: users.bob!.domainId,
          destinations: '["bob@example.org"]',
          user_id: users.bob!.id,
          smtp_quota_per_hour: null,
          smtp_quota_per_day: null,
          random: 1 as const,
          note: null,
          created_at: now,
          updated_at: now,
          deleted: 0,
        })),
      )
      .execute();
    const last = await aliases.createRandom(users.bob!);
    assert.equal((await aliases.list(users.bob!)).randomLeft, 0);
    assert.equal(await reason(aliases.createRandom(users.bob!)), "random_limit");
    await aliases.delete(users.bob!, last.id);
    await aliases.createRandom(users.bob!);
    assert.equal(await reason(aliases.createRandom(users.bob!)), "random_limit");
  });

  test("a custom alias: lower-cased, only [a-z0-9._-] and our address syntax, the user's domain", async () => {
    const alias = await aliases.createCustom(users.dave!, "  Dave.Work ", " job ");
    assert.equal(alias.source, "dave.work@example.org");
    assert.equal(alias.random, false);
    assert.equal(alias.note, "job");
    assert.equal(alias.deletable, false, "a user does not delete a custom alias");
    for (const bad of ["dave work", "dave+tag", "dave@example.com", "dävé", "dave/..", ""])
      assert.equal(await reason(aliases.createCustom(users.dave!, bad)), "characters", bad);
    // What the reference lets through (13.16): dots at the ends or doubled, a leading '-', too long.
    for (const bad of [".dave", "dave.", "da..ve", "-dave", "d".repeat(65)])
      assert.equal(await reason(aliases.createCustom(users.dave!, bad)), "syntax", bad);
    assert.equal(
      (await aliases.createCustom(users.dave!, "d".repeat(64))).source,
      `${"d".repeat(64)}@example.org`,
    );
  });

  test("available means never used: users and aliases, deleted ones included, and reserved names", async () => {
    const taken = ["alice", "gone", "team", "old-team", "postmaster", "abuse", "webmaster", "WebMaster"];
    for (const localPart of taken)
      assert.equal(await reason(aliases.createCustom(users.erin!, localPart)), "taken", localPart);
    // The same local part in another domain is another address: other@example.com does not block it.
    assert.equal((await aliases.createCustom(users.erin!, "other")).source, "other@example.org");
    assert.equal((await aliases.list(users.erin!)).customLeft, 2);
  });

  test("fewer than 3 active custom aliases, counted across domains, also when requests race", async () => {
    // carol holds carol@example.com from an administrator: two more in her own domain.
    const results = await Promise.allSettled(
      ["c1", "c2", "c3", "c4", "c5"].map((localPart) => aliases.createCustom(users.carol!, localPart)),
    );
    const created = results.filter((r) => r.status === "fulfilled");
    const refused = results.flatMap((r) =>
      r.status === "rejected" && r.reason instanceof ServiceError ? [ownAliasReason(r.reason)] : [],
    );
    assert.equal(created.length, 2);
    assert.deepEqual(refused, ["custom_limit", "custom_limit", "custom_limit"]);
    const own = await aliases.list(users.carol!);
    assert.equal(own.custom.length, 3);
    assert.ok(own.custom.some((a) => a.source === "carol@example.com"));
    assert.equal(own.customLeft, 0);
    assert.equal(own.domain, "example.org");
  });

  test("two users racing for one address: one gets it, the other is told it is taken", async () => {
    const results = await Promise.allSettled([
      aliases.createCustom(users.grace!, "shared"),
      aliases.createCustom(users.frank!, "shared"),
    ]);
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
    const refusal = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    assert.ok(refusal.reason instanceof ServiceError, String(refusal.reason));
    assert.equal(refusal.reason.code, "own_alias.taken");
  });

  test("deletion: random ones by their owner, custom ones by domain admins; soft, the address stays taken, its key goes", async () => {
    const random = await aliases.createRandom(users.grace!);
    assert.equal(await reason(aliases.delete(users.alice!, random.id)), "not_found", "not alice's");
    assert.equal(await aliases.delete(users.grace!, random.id), random.source);
    assert.equal(await reason(aliases.delete(users.grace!, random.id)), "not_found", "already deleted");
    assert.equal(await reason(aliases.delete(users.grace!, 987654)), "not_found");
    const row = await service.services.database.db
      .selectFrom("aliases")
      .selectAll()
      .where("source", "=", random.source)
      .executeTakeFirstOrThrow();
    assert.deepEqual([flag(row.deleted), row.user_id, row.destinations], [true, null, "[]"]);

    const custom = await aliases.createCustom(users.grace!, "grace.pgp");
    assert.equal(await reason(aliases.delete(users.grace!, custom.id)), "not_deletable");
    const adminOwn = await aliases.createCustom(users.admin!, "helpdesk");
    assert.equal(adminOwn.deletable, true);
    const { publicKey } = await openpgp.generateKey({ userIDs: [{ email: "helpdesk@example.org" }] });
    await service.services.openPgpKeys.import("helpdesk@example.org", publicKey, users.admin!.id);
    await aliases.delete(users.admin!, adminOwn.id);
    await assert.rejects(service.services.openPgpKeys.get("helpdesk@example.org"), /no OpenPGP key/);
    assert.equal(await reason(aliases.createCustom(users.admin!, "helpdesk")), "taken");
    const lookup = await service.request("GET", "/api/mta/alias/helpdesk@example.org", { token: mta });
    assert.deepEqual(lookup.body, []);
  });

  test("a spam-flagged account manages no aliases", async () => {
    assert.equal(await reason(aliases.createRandom(users.spam!)), "not_permitted");
    assert.equal(await reason(aliases.createCustom(users.spam!, "spammy")), "not_permitted");
  });

  test("the page answers each refusal with its status and the reason next to the field; deletion needs the CSRF token", async () => {
    const web = new WebClient(service.url);
    await web.signIn("dave@example.org");
    const page = await web.get("/account/alias");
    assert.equal(page.status, 200);
    assert.ok(page.text.includes("dave.work@example.org"));

    const characters = await web.post("/account/alias/custom", { localPart: "no way", customNote: "" });
    assert.equal(characters.status, 422);
    assert.match(fieldError(characters.text, "localPart") ?? "", /unexpected characters/);
    const empty = await web.post("/account/alias/custom", { localPart: " ", customNote: "" });
    assert.equal(empty.status, 422);
    assert.match(fieldError(empty.text, "localPart") ?? "", /required/);
    const taken = await web.post("/account/alias/custom", { localPart: "alice", customNote: "" });
    assert.equal(taken.status, 409);
    assert.match(fieldError(taken.text, "localPart") ?? "", /already taken/);
    const note = await web.post("/account/alias/random", { randomNote: "n".repeat(41) });
    assert.equal(note.status, 422);
    assert.match(fieldError(note.text, "randomNote") ?? "", /at most 40 characters/);

    const created = await web.post("/account/alias/custom", { localPart: "dave.third", customNote: "" });
    assert.equal(created.status, 303);
    assert.equal(created.location, "/account/alias");
    const limit = await web.post("/account/alias/custom", { localPart: "dave.fourth", customNote: "" });
    assert.equal(limit.status, 409);
    assert.match(limit.text, /reached the limit of 3 custom aliases/);

    const random = await web.post("/account/alias/random", { randomNote: "" });
    assert.equal(random.status, 303);
    const [mine] = (await aliases.list(users.dave!)).random;
    assert.ok(mine);
    const withoutToken = await web.post(`/account/alias/delete/${mine.id}`, {}, { csrf: false });
    assert.equal(withoutToken.status, 403);
    const [customOne] = (await aliases.list(users.dave!)).custom;
    const forbidden = await web.post(`/account/alias/delete/${customOne!.id}`, {});
    assert.equal(forbidden.status, 403);
    const alices = (await aliases.list(users.alice!)).random[0]!;
    const notMine = await web.post(`/account/alias/delete/${alices.id}`, {});
    assert.equal(notMine.status, 404);
    const nonsense = await web.post("/account/alias/delete/abc", {});
    assert.equal(nonsense.status, 404);
    const deleted = await web.post(`/account/alias/delete/${mine.id}`, {});
    assert.equal(deleted.status, 303);
    assert.equal((await aliases.list(users.dave!)).random.length, 0);

    const spam = new WebClient(service.url);
    await spam.signIn("spam@example.org");
    assert.equal((await spam.get("/account/alias")).status, 403);
    assert.equal((await spam.post("/account/alias/random", { randomNote: "" })).status, 403);
  });
});
