import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  caseVariants,
  generateInviteCode,
  inviteCodeAllowance,
  inviteCodeAlphabet,
  inviteCodeBits,
  inviteCodePattern,
  inviteCodeUnusable,
  normalizeInviteCode,
} from "../src/accounts/invite-codes.ts";
import { registrationRefused } from "../src/accounts/registration.ts";
import { isRefusal, ServiceError } from "../src/errors.ts";
import { byTest, password } from "./helpers/fixtures.ts";
import { startService, type TestService } from "./helpers/service.ts";

const day = 86400;
const now = () => Math.floor(Date.now() / 1000);

interface Answer {
  status: number;
  location: string | null;
  text: string;
}

/**
 * A browser in miniature for the pages: keeps cookies, does not follow redirects, and posts forms
 * with the CSRF token of the last form it saw (a token stays valid for its client's CSRF cookie).
 */
class WebClient {
  readonly #base: string;
  readonly #cookies = new Map<string, string>();
  #csrf = "";

  constructor(base: string) {
    this.#base = base;
  }

  async request(method: string, path: string, form?: Record<string, string>): Promise<Answer> {
    const headers: Record<string, string> = {};
    if (this.#cookies.size > 0)
      headers.cookie = [...this.#cookies].map(([name, value]) => `${name}=${value}`).join("; ");
    let body: string | undefined;
    if (form) {
      headers["content-type"] = "application/x-www-form-urlencoded";
      body = new URLSearchParams(form).toString();
    }
    const response = await fetch(this.#base + path, { method, headers, body, redirect: "manual" });
    for (const line of response.headers.getSetCookie()) {
      const pair = line.split(";")[0] ?? "";
      const at = pair.indexOf("=");
      const [name, value] = [pair.slice(0, at), pair.slice(at + 1)];
      if (value === "" || /expires=Thu, 01 Jan 1970/i.test(line)) this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
    const text = await response.text();
    const token = /name="_csrf" value="([^"]+)"/.exec(text);
    if (token?.[1]) this.#csrf = token[1];
    return { status: response.status, location: response.headers.get("location"), text };
  }

  get(path: string) {
    return this.request("GET", path);
  }

  async post(path: string, form: Record<string, string> = {}) {
    if (this.#csrf === "") await this.get("/login");
    return this.request("POST", path, { _csrf: this.#csrf, ...form });
  }

  async signIn(email: string, pass = password) {
    const answer = await this.post("/login", { email, password: pass });
    assert.equal(answer.status, 303, answer.text);
    return answer;
  }
}

/** A refused registration's problems (a password's by its rule's code), or a failure when the promise did not refuse. */
async function refusal(promise: Promise<unknown>): Promise<string[]> {
  try {
    await promise;
  } catch (error) {
    if (isRefusal(error, registrationRefused))
      return error.params.problems.map(
        (p) =>
          `${p.field}:${typeof p.reason === "string" ? p.reason : p.reason.code.replace(/^password\./, "")}`,
      );
    throw error;
  }
  assert.fail("the registration was not refused");
}

async function serviceError(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ServiceError) return error.kind;
    throw error;
  }
  assert.fail("no ServiceError");
}

describe("invite codes and registration", () => {
  let service: TestService;
  const users = () => service.services.users;
  const codes = () => service.services.inviteCodes;
  const register = (code: string, localPart: string, pass = password) =>
    service.services.registration.register({ code, localPart, password: pass });
  const newCode = (owner = "alice@example.org", domain = "example.org", code?: string) =>
    codes().create({ domain, owner, ...(code ? { code } : {}) });
  /** A userli code as the importer writes it: six of [0-9a-zA-Z], as they were. */
  const legacyCode = async (code: string, owner = "alice@example.org", domain = "example.org") => {
    const { db } = service.services.database;
    const [user, dom] = await Promise.all([users().get(owner), service.services.domains.get(domain)]);
    await db
      .insertInto("invite_codes")
      .values({
        code,
        domain_id: dom.id,
        user_id: user.id,
        redeemed_at: null,
        redeemed_by_id: null,
        created_at: now(),
      })
      .execute();
    return (await codes().find(code))!;
  };
  /** Whether the one check takes the code, or its one refusal. */
  const checked = async (code: string) => {
    try {
      await codes().check(code);
      return "ok";
    } catch (error) {
      if (isRefusal(error, inviteCodeUnusable)) return "unusable";
      throw error;
    }
  };
  const userCount = async (email: string) =>
    (await service.services.database.db.selectFrom("users").select("id").where("email", "=", email).execute())
      .length;

  before(async () => {
    // An SMTP relay that is never contacted: it only switches the e-mail outbox on.
    service = await startService({ web: true, serviceOptions: { smtpUrl: "smtp://127.0.0.1:9" } });
    const { domains, webhooks, settings } = service.services;
    await domains.create("example.org");
    await domains.updateInvitations("example.org", { enabled: true, limit: 3, waitingPeriodDays: 7 });
    await domains.create("closed.org");
    await settings.update({ app_url: "https://users.example.org/", project_name: "Example" });
    await webhooks.create({
      url: "http://127.0.0.1:9/hook",
      events: ["user.created"],
      secret: "s".repeat(32),
    });
    await users().create({ email: "alice@example.org", password, mailCrypt: false });
    await users().create({ email: "bob@closed.org", password, mailCrypt: false });
  });
  after(() => service?.close());

  test("new codes: 20 symbols of an alphabet without look-alikes (at least 80 bits) in dashed groups of five, drawn at random, unique", async () => {
    assert.equal(inviteCodeAlphabet.length, 31);
    for (const lookAlike of "01ILO") assert.ok(!inviteCodeAlphabet.includes(lookAlike), lookAlike);
    assert.ok(inviteCodeBits >= 80, `${inviteCodeBits} bits`);
    const drawn = new Set(Array.from({ length: 500 }, generateInviteCode));
    assert.equal(drawn.size, 500, "no repetition");
    for (const code of drawn) {
      assert.match(code, /^[2-9A-HJKMNP-Z]{5}(-[2-9A-HJKMNP-Z]{5}){3}$/);
      assert.ok(inviteCodePattern.test(code));
    }
    // Every symbol turns up, at every position: drawn from the whole alphabet.
    const symbols = [...drawn].join("").replaceAll("-", "");
    assert.equal(new Set(symbols).size, 31);
    assert.equal(caseVariants("123456").length, 1);
    assert.deepEqual(caseVariants("a1B").sort(), ["A1B", "A1b", "a1B", "a1b"]);
    assert.equal(caseVariants("abcdef").length, 64);

    const given = await newCode("alice@example.org", "example.org", "abcde fghjk-mnpqr stuvw");
    assert.equal(given.code, "ABCDE-FGHJK-MNPQR-STUVW", "a given code is stored in its written form");
    assert.equal(given.owner, "alice@example.org");
    assert.equal(
      await serviceError(newCode("alice@example.org", "example.org", "ABCDEFGHJKMNPQRSTUVW")),
      "conflict",
    );
    for (const bad of ["abc", "AbCdEf", "ABCDE-FGHJK-MNPQR-STUV0", "ABCDE-FGHJK-MNPQR-STUVWX"])
      assert.equal(await serviceError(newCode("alice@example.org", "example.org", bad)), "invalid", bad);
    assert.equal(await serviceError(newCode("nobody@example.org")), "invalid");
    assert.equal(await serviceError(newCode("alice@example.org", "nowhere.org")), "invalid");
    assert.equal(
      await serviceError(
        codes().create({ domain: "example.org", owner: "alice@example.org" }, { domainId: -1 }),
      ),
      "invalid",
      "a domain admin creates codes for its own domain only",
    );
  });

  test("a code is found however it is typed: case folded, dashes and spaces ignored; userli's six-character codes in any case", async () => {
    const code = await newCode();
    const bare = code.code.replaceAll("-", "");
    for (const typed of [
      code.code,
      code.code.toLowerCase(),
      bare,
      bare.toLowerCase(),
      ` ${bare.slice(0, 4)} ${bare.slice(4, 12)}-${bare.slice(12)} `,
      code.code.replaceAll("-", " - "),
    ]) {
      assert.equal((await codes().find(typed))?.id, code.id, typed);
      assert.equal(await checked(typed), "ok", typed);
    }
    assert.deepEqual(normalizeInviteCode(` ${bare.toLowerCase()} `), { code: code.code, legacy: false });
    assert.equal(normalizeInviteCode(`${bare}2`), null);
    assert.equal(normalizeInviteCode(bare.replace(/.$/, "O")), null, "a look-alike is no symbol");
    const legacy = await legacyCode("AbCdEf");
    for (const typed of ["AbCdEf", "ABCDEF", "abcdef", "abc-def", " ab cd ef "])
      assert.equal((await codes().find(typed))?.id, legacy.id, typed);
    assert.equal(await checked("abcdef"), "ok");
    assert.equal(await codes().find("abcde!"), null);
    // A userli code still registers an account.
    assert.equal((await register("aBcDeF", "olduser")).user.email, "olduser@example.org");
    assert.equal(await checked("AbCdEf"), "unusable", "and is used up");
  });

  test("a code cannot be used when its owner is suspicious by the hierarchy (spam too) or gone, or its domain does not invite: one refusal for all", async () => {
    await users().create({ email: "spam@example.org", password, roles: ["ROLE_SPAM"], mailCrypt: false });
    await users().create({
      email: "sus@example.org",
      password,
      roles: ["ROLE_SUSPICIOUS"],
      mailCrypt: false,
    });
    await users().create({ email: "gone@example.org", password, mailCrypt: false });
    const spam = await newCode("spam@example.org");
    const suspicious = await newCode("sus@example.org");
    const gone = await newCode("gone@example.org");
    await service.services.lifecycle.delete("gone@example.org", byTest);
    const closed = await newCode("bob@closed.org", "closed.org");
    // The reference checks the raw role list, so a spam-only owner's codes stayed valid (its bug 12).
    for (const code of [spam, suspicious, gone, closed]) assert.equal(await checked(code.code), "unusable");
    for (const code of [closed.code, spam.code, "zzzzzz", "ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ", "not a code"])
      await assert.rejects(register(code, "someone"), (error) => isRefusal(error, inviteCodeUnusable), code);
    assert.equal(await userCount("someone@example.org"), 0);
    assert.equal(await userCount("someone@closed.org"), 0);
  });

  test("the local part: 3-32 of [a-z0-9._-] after lower-casing, our address syntax, free (users and aliases, deleted ones too, reserved names); the password policy", async () => {
    const code = await newCode();
    await users().create({ email: "former@example.org", password, mailCrypt: false });
    await service.services.lifecycle.delete("former@example.org", byTest);
    await service.services.aliases.create({
      source: "oldalias@example.org",
      destinations: ["alice@example.org"],
    });
    await service.services.lifecycle.deleteAlias("oldalias@example.org");
    await service.services.aliases.create({
      source: "alias@example.org",
      destinations: ["alice@example.org"],
    });
    const cases: [string, string][] = [
      ["ab", "localPart:too_short"],
      ["a".repeat(33), "localPart:too_long"],
      ["a+b", "localPart:characters"],
      ["ümlaut", "localPart:characters"],
      ["a b", "localPart:characters"],
      [".abc", "localPart:syntax"],
      ["abc.", "localPart:syntax"],
      ["a..b", "localPart:syntax"],
      ["-abc", "localPart:syntax"],
      ["alice", "localPart:taken"],
      ["ALICE", "localPart:taken"],
      ["former", "localPart:taken"],
      ["alias", "localPart:taken"],
      ["oldalias", "localPart:taken"],
      ["postmaster", "localPart:taken"],
      ["Abuse", "localPart:taken"],
    ];
    for (const [localPart, expected] of cases)
      assert.deepEqual(await refusal(register(code.code, localPart)), [expected], localPart);
    assert.deepEqual(await refusal(register(code.code, "fine.name", "short")), ["password:too_short"]);
    assert.deepEqual(await refusal(register(code.code, "x", "short")), [
      "localPart:too_short",
      "password:too_short",
    ]);
    assert.equal((await codes().get(code.id)).redeemedAt, null, "nothing was written");
    // 32 characters with every allowed symbol is fine.
    const ok = await register(code.code, ` Mixed.Case_${"x".repeat(19)}-9 `);
    assert.equal(ok.user.email, `mixed.case_${"x".repeat(19)}-9@example.org`);
  });

  test("a registration creates the account with keys and redeems its code, with user.created and the welcome e-mail, all in one transaction", async () => {
    const code = await newCode();
    const { user, recoveryToken } = await register(code.code, "Newbie");
    assert.equal(user.email, "newbie@example.org");
    assert.deepEqual(user.roles, ["ROLE_USER"]);
    assert.equal(user.mailCrypt, true, "MailCrypt level 2 (the default) gives new accounts keys");
    assert.match(recoveryToken ?? "", /^[0-9a-f-]{36}$/);
    assert.equal(user.lastLoginTime, null);
    const redeemed = await codes().get(code.id);
    assert.ok(redeemed.redeemedAt);
    assert.equal(redeemed.redeemedBy, "newbie@example.org");
    const { db } = service.services.database;
    const created = (
      await db.selectFrom("webhook_deliveries").select("body").where("type", "=", "user.created").execute()
    ).map((row) => JSON.parse(row.body).data.email);
    assert.ok(created.includes("newbie@example.org"));
    const mail = await db
      .selectFrom("mail_outbox")
      .selectAll()
      .where("recipient", "=", "newbie@example.org")
      .execute();
    assert.equal(mail.length, 1);
    assert.equal(mail[0]?.subject, "Welcome to Example");
    assert.match(mail[0]?.body ?? "", /https:\/\/users\.example\.org\/account\/voucher/);
    assert.ok(!mail[0]?.body.includes(recoveryToken!), "no token in an e-mail");

    await assert.rejects(register(code.code, "second"), (error) => isRefusal(error, inviteCodeUnusable));
    assert.equal(await userCount("second@example.org"), 0);
    // A refused registration leaves no e-mail behind either.
    assert.equal(
      (
        await db
          .selectFrom("mail_outbox")
          .select("id")
          .where("recipient", "=", "second@example.org")
          .execute()
      ).length,
      0,
    );
  });

  test("one code, several registrations at once: exactly one succeeds (services and pages)", async () => {
    const code = await newCode();
    const results = await Promise.allSettled(
      ["race1", "race2", "race3"].map((localPart) => register(code.code, localPart)),
    );
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
    for (const r of results)
      if (r.status === "rejected") assert.ok(isRefusal(r.reason, inviteCodeUnusable), String(r.reason));
    const made = await Promise.all(["race1", "race2", "race3"].map((l) => userCount(`${l}@example.org`)));
    assert.equal(
      made.reduce((a, b) => a + b, 0),
      1,
    );

    // The same through the pages: two visitors post the form of one code at the same moment.
    const page = await newCode();
    const [one, two] = [new WebClient(service.url), new WebClient(service.url)];
    await Promise.all([one.get(`/register/${page.code}`), two.get(`/register/${page.code}`)]);
    const answers = await Promise.all(
      [
        [one, "pagerace1"],
        [two, "pagerace2"],
      ].map(([client, localPart]) =>
        (client as WebClient).post(`/register/${page.code}`, {
          localPart: localPart as string,
          password,
          passwordRepeat: password,
        }),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    assert.deepEqual(statuses, [200, 303], answers.map((a) => `${a.status} ${a.location}`).join(", "));
    assert.equal(answers.find((a) => a.status === 303)?.location, "/?notice=inviteInvalid");
    assert.equal((await userCount("pagerace1@example.org")) + (await userCount("pagerace2@example.org")), 1);
  });

  test("one address, two codes at once: exactly one account, the other told the address is taken", async () => {
    const [a, b] = await Promise.all([newCode(), newCode()]);
    const results = await Promise.allSettled([register(a.code, "same"), register(b.code, "same")]);
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
    const rejected = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    assert.ok(isRefusal(rejected.reason, registrationRefused));
    assert.deepEqual(
      rejected.reason.params.problems.map((p) => `${p.field}:${String(p.reason)}`),
      ["localPart:taken"],
    );
    const unredeemed = [await codes().get(a.id), await codes().get(b.id)].filter(
      (c) => c.redeemedAt === null,
    );
    assert.equal(unredeemed.length, 1, "the losing registration's code stays usable");
  });

  test("automatic codes: invitations on, not suspicious, signed in once, older than the waiting period, below the limit; handed out by a POST only, once", async () => {
    await users().create({ email: "eve@example.org", password, mailCrypt: false });
    const eve = await users().get("eve@example.org");
    const { db } = service.services.database;
    const allowance = () => codes().allowance(eve.id);
    assert.equal((await allowance()).reason, "never_signed_in");
    assert.deepEqual(await codes().handOut(eve.id), []);
    await users().update("eve@example.org", { lastLoginTime: now() });
    const waiting = await allowance();
    assert.equal(waiting.reason, "waiting");
    assert.equal(waiting.waitingUntil, eve.createdAt + 7 * day);
    await db
      .updateTable("users")
      .set({ created_at: now() - 8 * day })
      .where("id", "=", eve.id)
      .execute();
    const due = await allowance();
    assert.deepEqual([due.due, due.reason, due.owned, due.limit], [3, null, 0, 3]);

    // Viewing the page hands out nothing (the reference's bug 19); two clicks at once hand out the limit once.
    const client = new WebClient(service.url);
    await client.signIn("eve@example.org");
    for (let i = 0; i < 2; i++) {
      const page = await client.get("/account/voucher");
      assert.equal(page.status, 200);
      assert.match(page.text, /You can get 3 invite codes now/);
    }
    assert.equal((await codes().unredeemedOf(eve.id)).length, 0);
    const clicks = await Promise.all([
      client.post("/account/voucher/hand-out"),
      client.post("/account/voucher/hand-out"),
    ]);
    assert.deepEqual(
      clicks.map((c) => c.location),
      ["/account/voucher", "/account/voucher"],
    );
    const mine = await codes().unredeemedOf(eve.id);
    assert.equal(mine.length, 3);
    const page = await client.get("/account/voucher");
    for (const code of mine)
      assert.ok(page.text.includes(`https://users.example.org/register/${code.code}`), "link from app_url");
    assert.match(page.text, /received all 3 invite codes/);
    assert.equal((await allowance()).reason, "limit_reached");
    // Redeemed codes are not replaced.
    await register(mine[0]!.code, "evesfriend");
    assert.equal((await allowance()).due, 0);
    assert.equal((await codes().unredeemedOf(eve.id)).length, 2);

    await users().update("eve@example.org", { roles: ["ROLE_SPAM"] });
    assert.equal((await allowance()).reason, "suspicious");
    assert.equal((await client.get("/account/voucher")).status, 403);
    assert.equal((await client.post("/account/voucher/hand-out")).status, 403);
    assert.equal(await checked(mine[1]!.code), "unusable", "a spam user's codes stop working");
    await users().update("eve@example.org", { roles: [] });
    await service.services.domains.updateInvitations("example.org", { enabled: false });
    assert.equal((await allowance()).reason, "disabled");
    const disabled = await client.get("/account/voucher");
    assert.match(disabled.text, /Invitations are turned off for your domain/);
    assert.ok(!disabled.text.includes(mine[1]!.code));
    await service.services.domains.updateInvitations("example.org", { enabled: true });
  });

  test("the rule of the automatic codes at its edges", () => {
    const on = { enabled: true, limit: 3, waitingPeriodDays: 7 };
    const user = { roles: ["ROLE_USER" as const], lastLoginTime: 1, createdAt: 1000, deleted: false };
    const at = 1000 + 7 * day;
    assert.equal(inviteCodeAllowance(user, on, 0, at - 1).reason, "waiting");
    assert.equal(inviteCodeAllowance(user, on, 0, at).due, 3);
    assert.equal(inviteCodeAllowance(user, on, 2, at).due, 1);
    assert.equal(inviteCodeAllowance(user, on, 5, at).reason, "limit_reached");
    assert.equal(inviteCodeAllowance(user, { ...on, limit: 0 }, 0, at).reason, "limit_reached");
    assert.equal(inviteCodeAllowance(user, { ...on, enabled: false }, 0, at).reason, "disabled");
    assert.equal(inviteCodeAllowance({ ...user, deleted: true }, on, 0, at).reason, "disabled");
    assert.equal(inviteCodeAllowance({ ...user, roles: ["ROLE_SPAM"] }, on, 0, at).reason, "suspicious");
    assert.equal(inviteCodeAllowance({ ...user, lastLoginTime: null }, on, 0, at).reason, "never_signed_in");
  });

  test("multipliers (and domain admins, admins) create more codes beyond the limit; others cannot", async () => {
    await users().create({
      email: "multi@example.org",
      password,
      roles: ["ROLE_MULTIPLIER"],
      mailCrypt: false,
    });
    await users().create({
      email: "dadmin@example.org",
      password,
      roles: ["ROLE_DOMAIN_ADMIN"],
      mailCrypt: false,
    });
    await users().create({ email: "plain@example.org", password, mailCrypt: false });
    const multi = await users().get("multi@example.org");
    for (let i = 0; i < 4; i++) await codes().createOneMore(multi.id);
    assert.equal((await codes().unredeemedOf(multi.id)).length, 4);
    const dadmin = await users().get("dadmin@example.org");
    assert.equal((await codes().createOneMore(dadmin.id)).domain, "example.org");
    const plain = await users().get("plain@example.org");
    assert.equal(await serviceError(codes().createOneMore(plain.id)), "invalid");
    const bob = await users().get("bob@closed.org");
    await users().update("bob@closed.org", { roles: ["ROLE_MULTIPLIER"] });
    assert.equal(
      await serviceError(codes().createOneMore(bob.id)),
      "invalid",
      "not while the domain does not invite",
    );

    const client = new WebClient(service.url);
    await client.signIn("plain@example.org");
    const page = await client.get("/account/voucher");
    assert.ok(!page.text.includes("Create invite code"));
    assert.equal((await client.post("/account/voucher/create")).status, 403);
    const multiClient = new WebClient(service.url);
    await multiClient.signIn("multi@example.org");
    assert.match((await multiClient.get("/account/voucher")).text, /Create invite code/);
    assert.equal((await multiClient.post("/account/voucher/create")).location, "/account/voucher");
    assert.equal((await codes().unredeemedOf(multi.id)).length, 5);
  });

  test("the dashboard shows the invite-code card only to users who may have codes", async () => {
    const client = new WebClient(service.url);
    await client.signIn("plain@example.org");
    assert.match((await client.get("/account")).text, /href="\/account\/voucher"/);
    const closed = new WebClient(service.url);
    await closed.signIn("bob@closed.org");
    assert.ok(!(await closed.get("/account")).text.includes('href="/account/voucher"'));
  });

  test("the domain's invitation settings are checked: limit 0 or more, waiting period at least a day", async () => {
    const { domains } = service.services;
    for (const patch of [
      { limit: -1 },
      { limit: 1.5 },
      { limit: "3x" },
      { waitingPeriodDays: 0 },
      { waitingPeriodDays: -2 },
      { enabled: "yes" },
    ])
      assert.equal(
        await serviceError(domains.updateInvitations("closed.org", patch)),
        "invalid",
        JSON.stringify(patch),
      );
    assert.deepEqual(await domains.updateInvitations("closed.org", { limit: "0", waitingPeriodDays: 1 }), {
      enabled: false,
      limit: 0,
      waitingPeriodDays: 1,
    });
    assert.equal(await serviceError(domains.updateInvitations("nowhere.org", { limit: 1 })), "not_found");
  });

  test("reserved names: import (comments, blanks, case, repeats, bad lines), export sorted with a trailing newline, case-insensitive", async () => {
    const { reservedNames } = service.services;
    const result = await reservedNames.import(
      "# reserved\n\n  Webmaster \nhostmaster\r\nwebmaster\npostmaster\nbad name\nfoo@bar\n#tail",
    );
    assert.deepEqual(result, { imported: 2, skipped: 2, invalid: ["bad name", "foo@bar"] });
    assert.equal(await reservedNames.isReserved("WebMaster"), true);
    assert.equal(await reservedNames.isReserved("webmistress"), false);
    const exported = await reservedNames.export();
    assert.equal(exported, "abuse\nhostmaster\npostmaster\nwebmaster\n");
    assert.deepEqual(await reservedNames.import(exported), { imported: 0, skipped: 4, invalid: [] });
    assert.equal(await serviceError(reservedNames.create("HOSTMASTER")), "conflict");
    assert.equal(await serviceError(reservedNames.create("no way")), "invalid");
    assert.equal((await reservedNames.create(" Info ")).name, "info");
    const listed = await reservedNames.list({ search: "master", limit: 2, offset: 0 });
    assert.equal(listed.total, 3);
    assert.deepEqual(
      listed.items.map((n) => n.name),
      ["hostmaster", "postmaster"],
    );
    const code = await newCode();
    assert.deepEqual(await refusal(register(code.code, "WebMaster")), ["localPart:taken"]);
    await reservedNames.delete("WEBMASTER");
    assert.equal(await serviceError(reservedNames.delete("webmaster")), "not_found");
    assert.equal((await register(code.code, "webmaster")).user.email, "webmaster@example.org");
  });

  test("the admin area's list: status and domain filters, search in code and owner, pages; deletion scoped to a domain", async () => {
    const { domains } = service.services;
    const closedId = (await domains.get("closed.org")).id;
    const exampleId = (await domains.get("example.org")).id;
    await legacyCode("ClOsEd", "bob@closed.org", "closed.org");
    const all = await codes().list({ search: "", limit: 500, offset: 0 });
    assert.ok(all.total >= 10);
    const redeemed = await codes().list({ search: "", limit: 500, offset: 0 }, { status: "redeemed" });
    assert.ok(redeemed.items.length > 0 && redeemed.items.every((c) => c.redeemedAt !== null));
    const unredeemed = await codes().list({ search: "", limit: 500, offset: 0 }, { status: "unredeemed" });
    assert.equal(redeemed.total + unredeemed.total, all.total);
    const closed = await codes().list({ search: "", limit: 500, offset: 0 }, { domainId: closedId });
    assert.ok(closed.items.every((c) => c.domain === "closed.org"));
    assert.equal((await codes().list({ search: "closed", limit: 10, offset: 0 })).items[0]?.code, "ClOsEd");
    const byOwner = await codes().list({ search: "multi@", limit: 2, offset: 2 });
    assert.equal(byOwner.total, 5);
    assert.equal(byOwner.items.length, 2);
    assert.ok(byOwner.items.every((c) => c.owner === "multi@example.org"));
    assert.equal((await codes().list({ search: "a\0b", limit: 10, offset: 0 })).total, 0);
    const target = closed.items[0]!;
    assert.equal(await serviceError(codes().delete(target.id, { domainId: exampleId })), "not_found");
    await codes().delete(target.id, { domainId: closedId });
    assert.equal(await serviceError(codes().get(target.id)), "not_found");
  });

  test("pages: the start page's code form, /register and /register/{code} answer each case", async () => {
    const client = new WebClient(service.url);
    const start = await client.get("/");
    assert.equal(start.status, 200);
    assert.match(start.text, /<label for="field-inviteCode">Invite code<\/label>/);
    const code = await newCode();
    const lower = await client.post("/", { inviteCode: ` ${code.code.toLowerCase().replaceAll("-", " ")} ` });
    assert.equal(lower.status, 303);
    assert.equal(lower.location, `/register/${code.code}`);
    assert.equal((await client.post("/", { inviteCode: "" })).status, 400);
    const form = await client.get(`/register/${code.code}`);
    assert.equal(form.status, 200);
    assert.match(form.text, />@example\.org<\/span>/);
    assert.equal((await client.get(`/register/${code.code.toLowerCase().replaceAll("-", "")}`)).status, 200);
    assert.equal((await client.get("/register")).location, "/");

    // One answer for every code that cannot be used: unknown (of either form, or no code at all),
    // used, its owner gone, its domain not inviting. Same status, same page but for the CSRF token.
    const used = (await codes().list({ search: "", limit: 1, offset: 0 }, { status: "redeemed" })).items[0]!;
    await users().create({ email: "leaving@example.org", password, mailCrypt: false });
    const ownerGone = await newCode("leaving@example.org");
    await service.services.lifecycle.delete("leaving@example.org", byTest);
    await service.services.domains.updateInvitations("closed.org", { enabled: false });
    const closedCode = await newCode("bob@closed.org", "closed.org");
    const refused = ["nope42", "ZZZZZ-ZZZZZ-ZZZZZ-ZZZZZ", used.code, ownerGone.code, closedCode.code, "abc"];
    const withoutToken = (text: string) => text.replace(/name="_csrf" value="[^"]+"/g, "");
    // Each case from a client with no failures yet: the sign-in guard throttles a client after five
    // unusable codes (sign-in-attacks.test.ts), which is not what this test looks at.
    const forgetFailures = () => service.services.database.db.deleteFrom("sign_in_failures").execute();
    const typed = [];
    for (const inviteCode of refused) {
      await forgetFailures();
      typed.push(await client.post("/", { inviteCode }));
    }
    for (const [i, answer] of typed.entries()) {
      assert.equal(answer.status, 422, refused[i]);
      assert.equal(withoutToken(answer.text), withoutToken(typed[0]!.text), refused[i]);
      assert.match(
        answer.text,
        /This invite code cannot be used: it is unknown, already used or no longer valid\./,
      );
      assert.ok(!answer.text.includes(refused[i]!), "the code is not echoed");
    }
    for (const method of ["get", "post"] as const) {
      const followed = [];
      for (const c of refused) {
        await forgetFailures();
        followed.push(await client[method](`/register/${encodeURIComponent(c)}`));
      }
      for (const [i, answer] of followed.entries()) {
        assert.equal(answer.status, 303, `${method} ${refused[i]}`);
        assert.equal(answer.location, "/?notice=inviteInvalid", `${method} ${refused[i]}`);
        assert.equal(answer.text, followed[0]!.text);
      }
    }
    const notice = await client.get("/?notice=inviteInvalid");
    assert.match(
      notice.text,
      /This invite code cannot be used: it is unknown, already used or no longer valid\./,
    );
    const closedPost = await client.post(`/register/${closedCode.code}`, {
      localPart: "sneaky",
      password,
      passwordRepeat: password,
    });
    assert.equal(closedPost.location, "/?notice=inviteInvalid");
    assert.equal(await userCount("sneaky@closed.org"), 0);
    await client.get(`/register/${code.code}`);

    // Re-checked on POST: refused fields come back next to the field, nothing written.
    const mismatch = await client.post(`/register/${code.code}`, {
      localPart: "pagey",
      password,
      passwordRepeat: `${password}!`,
    });
    assert.equal(mismatch.status, 422);
    assert.match(mismatch.text, /Password and confirmation do not match/);
    const taken = await client.post(`/register/${code.code}`, {
      localPart: "alice",
      password,
      passwordRepeat: password,
    });
    assert.equal(taken.status, 409);
    assert.match(taken.text, /id="field-localPart-error">The e-mail address is already taken\./);
    const done = await client.post(`/register/${code.code}`, {
      localPart: "pagey",
      password,
      passwordRepeat: password,
    });
    assert.equal(done.status, 200);
    assert.match(done.text, /id="recovery-token">[0-9a-f-]{36}</);
    const noAck = await client.post("/register/recovery-token", { token: "x" });
    assert.equal(noAck.status, 422);
    const ack = await client.post("/register/recovery-token", { ack: "yes" });
    assert.equal(ack.location, "/register/welcome");
    const welcome = await client.get("/register/welcome");
    assert.match(welcome.text, /Welcome to Example!/);
    assert.match(welcome.text, /You are now registered\./);
    assert.match(welcome.text, /pagey@example\.org/);
    assert.equal((await users().get("pagey@example.org")).lastLoginTime, null, "registration is no sign-in");
  });
});

describe("first-run setup: every step re-checks its precondition on POST", () => {
  let service: TestService;
  before(async () => {
    service = await startService({ web: true });
  });
  after(() => service?.close());

  test("/init, /init/user and /init/settings in order; a step done is never done again", async () => {
    const { db } = service.services.database;
    const visitor = new WebClient(service.url);
    assert.equal((await visitor.get("/")).location, "/init");
    assert.equal((await visitor.get("/init/user")).location, "/init");
    assert.equal((await visitor.get("/init/settings")).location, "/init");
    assert.equal(
      (await visitor.post("/init/user", { password, passwordRepeat: password })).location,
      "/init",
    );
    assert.equal((await db.selectFrom("users").select("id").execute()).length, 0);

    const page = await visitor.get("/init");
    assert.equal(page.status, 200);
    assert.match(page.text, /Domain name/);
    assert.match(page.text, /Set-up code/);
    const setupCode = (await service.services.setup.openSetupCode()) ?? "";
    assert.equal((await visitor.post("/init", { domain: "not a domain", setupCode })).status, 422);
    assert.equal((await visitor.post("/init", { domain: "", setupCode })).status, 400);
    // Step 2's form follows at once, the accepted code carried in a hidden field.
    const carried = await visitor.post("/init", { domain: "Example.NET", setupCode });
    assert.equal(carried.status, 200);
    assert.match(carried.text, /postmaster@example\.net/);
    assert.ok(carried.text.includes(`<input type="hidden" name="setupCode" value="${setupCode}">`));
    assert.equal((await visitor.post("/init", { domain: "other.net", setupCode })).location, "/init/user");
    assert.deepEqual(
      (await db.selectFrom("domains").select("name").execute()).map((d) => d.name),
      ["example.net"],
    );
    assert.equal((await visitor.get("/init")).location, "/init/user");

    const adminPage = await visitor.get("/init/user");
    assert.match(adminPage.text, /postmaster@example\.net/);
    assert.equal(
      (await visitor.post("/init/settings", { app_url: "https://evil.example" })).location,
      "/init/user",
    );
    assert.match(adminPage.text, /id="field-setupCode"/, "reached directly, step 2 asks for the code");
    assert.equal(
      (await visitor.post("/init/user", { password, passwordRepeat: "different", setupCode })).status,
      422,
    );
    const short = await visitor.post("/init/user", { password: "short", passwordRepeat: "short", setupCode });
    assert.equal(short.status, 422);
    assert.ok(short.text.includes(`<input type="hidden" name="setupCode" value="${setupCode}">`));
    const created = await visitor.post("/init/user", { password, passwordRepeat: password, setupCode });
    assert.equal(created.location, "/init/settings");
    const admin = await service.services.users.get("postmaster@example.net");
    assert.deepEqual(admin.roles, ["ROLE_USER", "ROLE_ADMIN"]);
    assert.equal(admin.mailCryptPublicKey, null, "as the reference: the first admin has no keys");

    // A second visitor replays the step (the reference reset postmaster's password here: bug 14).
    const stranger = new WebClient(service.url);
    const replay = await stranger.post("/init/user", {
      password: "the stranger's password",
      passwordRepeat: "the stranger's password",
    });
    assert.equal(replay.location, "/init/settings");
    assert.equal(
      (await service.services.users.get("postmaster@example.net")).passwordHash,
      admin.passwordHash,
    );
    assert.equal((await db.selectFrom("users").select("id").execute()).length, 1);
    // The settings step is the signed-in admin's, not a stranger's.
    assert.equal((await stranger.get("/init/settings")).location, "/login");
    assert.equal(
      (await stranger.post("/init/settings", { app_url: "https://evil.example" })).location,
      "/login",
    );
    assert.equal(await service.services.settings.get("app_url"), "https://users.example.org");

    const form = await visitor.get("/init/settings");
    assert.equal(form.status, 200);
    for (const proposed of [
      'value="https://users.example.net"',
      'value="https://example.net"',
      'value="noreply@example.net"',
      'value="admin@example.net"',
      'value="postmaster@example.net"',
    ])
      assert.ok(form.text.includes(proposed), proposed);
    const values = {
      app_name: "Example Mail",
      app_url: "https://users.example.net",
      project_name: "example.net",
      project_url: "https://example.net",
      email_sender_address: "noreply@example.net",
      email_notification_address: "admin@example.net",
      postmaster_address: "postmaster@example.net",
      webmail_url: "",
      mail_crypt: "2",
    };
    const bad = await visitor.post("/init/settings", {
      ...values,
      app_url: "users",
      app_name: "x",
      email_sender_address: "nope",
    });
    assert.equal(bad.status, 422);
    assert.match(bad.text, /id="field-app_url-error">Enter an address starting with http:\/\/ or https:\/\//);
    assert.match(bad.text, /id="field-app_name-error">Enter at least 3 characters\./);
    assert.match(bad.text, /id="field-email_sender_address-error">Enter an e-mail address\./);
    assert.equal(await service.services.settings.get("app_name"), "Userli", "nothing saved");
    const saved = await visitor.post("/init/settings", values);
    assert.equal(saved.location, "/");
    assert.equal(await service.services.settings.get("app_name"), "Example Mail");
    assert.equal(await service.services.settings.get("app_url"), "https://users.example.net");

    const again = await visitor.post("/init/settings", { ...values, app_name: "Changed Again" });
    assert.equal(again.location, "/");
    assert.equal(await service.services.settings.get("app_name"), "Example Mail");
    // Every step done: each one sends to where the service is now.
    for (const path of ["/init", "/init/user", "/init/settings"])
      assert.equal((await visitor.get(path)).location, "/", path);
    assert.equal((await visitor.post("/init", { domain: "late.net" })).location, "/");
    assert.equal((await db.selectFrom("domains").select("id").execute()).length, 1);
  });
});
