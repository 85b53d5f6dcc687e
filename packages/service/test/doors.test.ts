/**
 * One rule at every door. The password rule (accounts/password-policy.ts), the re-confirmation of
 * the current password under the sign-in throttle (SignInService.confirmPassword) and the answer to
 * an unreachable database are each written once; this file calls every door with the same input and
 * compares what each answers, side by side: the doors are rows of a table, each test loops over its
 * table, and one assertion compares the whole table with what the rule says (so a failure names
 * every door that answers otherwise, not just the first).
 *
 * Runs on the database TEST_DATABASE_URL names (SQLite otherwise); the database cut-off needs
 * PostgreSQL or MariaDB (a TCP proxy between the service and the server, as database-faults.test.ts).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, before, describe, test } from "node:test";
import * as openpgp from "openpgp";
import { minPasswordLength, passwordLeaked, passwordTooShort } from "../src/accounts/password-policy.ts";
import { passwordWrong, signInThrottled } from "../src/accounts/sign-in.ts";
import { clientPolicy } from "../src/accounts/sign-in-guard.ts";
import { CryptoPool } from "../src/credentials/crypto-pool.ts";
import { openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import type { AnyRefusal } from "../src/errors.ts";
import { buildApp } from "../src/http/app.ts";
import { type MessageKey, translator } from "../src/i18n/catalogue.ts";
import { refusalText } from "../src/i18n/refusal-text.ts";
import { createLogger } from "../src/logger.ts";
import { createServices, type Services } from "../src/services.ts";
import { webInterface } from "../src/web/plugin.ts";
import { notFoundPage } from "../src/web/render.ts";
import { freshDatabaseUrl, scratchDatabase } from "./helpers/databases.ts";
import { byTest, password } from "./helpers/fixtures.ts";
import { consolePath } from "./helpers/process.ts";
import { leaked, startRangeApi } from "./helpers/range-api.ts";
import { installationSecret } from "./helpers/service.ts";
import { TcpProxy } from "./helpers/tcp-proxy.ts";
import { fieldError, WebClient } from "./helpers/web-client.ts";

const en = translator("en");
const day = 86400;
const now = () => Math.floor(Date.now() / 1000);

/** In the local range API's list (below); long enough for the length rule. */
/** One character short of the rule's minimum. */
const tooShort = "eleven char";
assert.equal([...tooShort].length, minPasswordLength - 1);

/** The two inputs every door that sets a password is given, and the refusal the rule answers each with. */
const badPasswords: {
  input: string;
  password: string;
  refusal: AnyRefusal;
  params: Record<string, number>;
}[] = [
  { input: "leaked", password: leaked, refusal: passwordLeaked, params: {} },
  { input: "too short", password: tooShort, refusal: passwordTooShort, params: { min: minPasswordLength } },
];

// ---- the service, its HTTP side, the console

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

interface Running {
  url: string;
  services: Services;
  api(
    method: string,
    path: string,
    options?: { token?: string; json?: unknown; csv?: string },
  ): Promise<Answer>;
  close(): Promise<void>;
}

/**
 * The service as helpers/service.ts starts it (web pages included), on a database URL this file
 * knows, so the console can share the database and the cut-off test can put a proxy in front of it.
 */
async function serve(
  databaseUrl: string,
  options: { pwnedPasswordsUrl?: string; log?: NodeJS.WritableStream } = {},
): Promise<Running> {
  const database = await openDatabase(databaseUrl, { poolSize: 4 });
  await migrateToLatest(database);
  const services = createServices(database, new CryptoPool(2), {
    installationSecret: installationSecret(),
    pwnedPasswordsUrl: options.pwnedPasswordsUrl ?? null,
  });
  const app = await buildApp({
    logger: options.log ? createLogger("info", options.log) : createLogger("silent"),
    services,
    web: { plugin: webInterface, notFound: notFoundPage },
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return {
    url,
    services,
    async api(method, path, { token, json, csv } = {}) {
      const headers: Record<string, string> = {};
      if (token) headers.authorization = `Bearer ${token}`;
      let body: string | undefined;
      if (json !== undefined) {
        headers["content-type"] = "application/json";
        body = JSON.stringify(json);
      } else if (csv !== undefined) {
        headers["content-type"] = "text/csv";
        body = csv;
      }
      const response = await fetch(`${url}${path}`, { method, headers, body });
      const text = await response.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      return { status: response.status, headers: response.headers, text, body: parsed };
    },
    async close() {
      await app.close();
      await database.close();
    },
  };
}

/** The text of a page as a person reads it (the templates escape what they insert). */
const asRead = (html: string) =>
  html
    .replaceAll("&lt;", "<")
    .replaceAll("&gt;", ">")
    .replaceAll("&quot;", '"')
    .replaceAll("&#39;", "'")
    .replaceAll("&#x27;", "'")
    .replaceAll("&amp;", "&");

/** A field's error as shown, or null. */
const shownError = (html: string, field: string): string | null => {
  const error = fieldError(html, field);
  return error === null ? null : asRead(error);
};

/**
 * The catalogue's English text of a refusal (areas/refusals.ts), as pages and the console show it:
 * the refusal made with these parameters, read through the one function the surfaces use.
 */
const refusalWords = (refusal: AnyRefusal, params: Record<string, string | number> = {}) => {
  const { key, params: textParams } = refusalText(refusal(params));
  return (en as (key: MessageKey, params: Record<string, string | number>) => string)(key, textParams);
};

/**
 * bin/console as an operator runs it, on the test's database, with the range API configured. Not
 * spawnSync: the range API answers from this process, whose event loop must keep running.
 */
function runConsole(
  databaseUrl: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(consolePath, args, {
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: "silent", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const timer = setTimeout(() => child.kill("SIGKILL"), 60000);
  return new Promise((resolve) => {
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/** What an import answered, without the credentials it hands out. */
function importSummary(body: unknown): string {
  const { users, failed, lines, message } = (body ?? {}) as Record<string, unknown>;
  const problems = (list: unknown) =>
    Array.isArray(list) ? list.map((l) => `line ${l.line}: ${l.problems}`).join("; ") : "";
  if (Array.isArray(users))
    return `created ${users.map((u) => u.email).join(", ") || "nobody"}; failed ${problems(failed)}`;
  return `${message}: ${problems(lines)}`;
}

/** A table for the test's diagnostics: one line per row, columns aligned. */
function table(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return "";
  const columns = Object.keys(rows[0]!);
  const cells = rows.map((row) => columns.map((column) => String(row[column] ?? "")));
  const widths = columns.map((column, i) => Math.max(column.length, ...cells.map((c) => c[i]!.length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i]!)).join(" | ");
  return [line(columns), ...cells.map(line)].join("\n");
}

describe("one rule at every door", () => {
  let dir: { url: string; remove: () => Promise<void> };
  let range: Awaited<ReturnType<typeof startRangeApi>>;
  let service: Running;
  let adminToken: string;
  let serial = 0;

  before(async () => {
    range = await startRangeApi();
    dir = await scratchDatabase("mas-doors-");
    service = await serve(dir.url, { pwnedPasswordsUrl: range.url });
    const { domains, tokens } = service.services;
    // The primary domain, and no user yet: /init/user is the setup's current step (its row runs first).
    await domains.create("example.org");
    await domains.updateInvitations("example.org", { enabled: true, limit: 3, waitingPeriodDays: 7 });
    adminToken = (await tokens.create("doors", ["admin", "webmail"])).plainToken;
  });
  after(async () => {
    await service?.close();
    await new Promise((resolve) => range?.server.close(resolve));
    await dir?.remove();
  });

  const db = () => service.services.database.db;
  const fresh = (what: string) => `${what}${++serial}@example.org`;
  const newUser = async (what: string, extra: { mailCrypt?: boolean; roles?: string[] } = {}) => {
    const email = fresh(what);
    const { recoveryToken } = await service.services.users.create({ email, password, ...extra });
    return { email, recoveryToken };
  };
  const rowsOf = (email: string) => db().selectFrom("users").selectAll().where("email", "=", email).execute();
  const notCreated = async (email: string) =>
    (await rowsOf(email)).length === 0 ? "nothing" : "the user was created";
  /**
   * "Nothing changed" for a door that sets the password of `email`: the stored hash is the one of
   * now. When a door did change it, the old one is put back, so the next input meets the same account
   * (the sign-in with the old password at the end of each door checks the whole account).
   */
  const passwordKept = async (email: string) => {
    const before = (await rowsOf(email))[0]?.password;
    assert.ok(before);
    return async () => {
      const row = (await rowsOf(email))[0];
      if (row?.password === before && !row.deleted) return "nothing";
      await db().updateTable("users").set({ password: before }).where("email", "=", email).execute();
      return "the password was changed";
    };
  };
  const oldPasswordSignsIn = async (email: string) =>
    (await service.services.signIn.signIn(email, password)).kind === "ok";
  /** Each door's throttle starts from nothing: every page answers from one client address (127.0.0.1). */
  const forgetFailures = () => db().deleteFrom("sign_in_failures").execute();

  let admin: WebClient | undefined;
  const adminBrowser = async () => {
    if (admin) return admin;
    const { email } = await newUser("admin", { roles: ["ROLE_ADMIN"] });
    admin = new WebClient(service.url);
    await admin.signIn(email);
    return admin;
  };

  test("a leaked and a too short password: every door that sets a password refuses it, and nothing changes", async (t) => {
    type Said = { status: number | string; said: string | null };
    interface PasswordDoor {
      door: string;
      /** What the door answers when it refuses (a status, or the console's exit). */
      refused: number | string;
      /** What the door says for a refusal of the rule. */
      words: (bad: (typeof badPasswords)[number]) => string;
      /** Readies the door (a user, a signed-in browser, a form); then one attempt per input. */
      ready(): Promise<{
        attempt(bad: string, n: number): Promise<Said>;
        changed(n: number): Promise<string>;
        /** The account whose old password must still sign in once the door is done. */
        signsIn?: string;
      }>;
    }
    const page = (bad: (typeof badPasswords)[number]) => refusalWords(bad.refusal, bad.params);
    const api = (bad: (typeof badPasswords)[number]) => bad.refusal.apiText(bad.params);
    const consoleWords = (bad: (typeof badPasswords)[number]) => `error: ${page(bad)}`;
    const webmailWords: Record<string, string> = {
      [passwordLeaked.code]: "newPassword: the password has been leaked in a data breach; choose another one",
      [passwordTooShort.code]: `newPassword: the password must have at least ${minPasswordLength} characters`,
    };
    const formAnswer = (field: string) => (answer: { status: number; text: string }) => ({
      status: answer.status,
      said: shownError(answer.text, field),
    });
    const jsonAnswer = (answer: Answer) => ({
      status: answer.status,
      said: typeof answer.body?.message === "string" ? answer.body.message : answer.text,
    });
    const consoleEnv = { PWNED_PASSWORDS_URL: range.url };
    const consoleAnswer = (run: { status: number | null; stdout: string; stderr: string }) => ({
      status: `exit ${run.status}`,
      said: (run.stderr.trim() || run.stdout.trim()).split("\n")[0] ?? "",
    });

    const doors: PasswordDoor[] = [
      {
        door: "web /init/user (first admin)",
        refused: 422,
        words: page,
        async ready() {
          const browser = new WebClient(service.url);
          const form = await browser.get("/init/user");
          assert.equal(form.status, 200, "the setup waits for its first admin");
          return {
            attempt: async (bad) =>
              formAnswer("password")(
                await browser.post("/init/user", {
                  password: bad,
                  passwordRepeat: bad,
                  setupCode: (await service.services.setup.openSetupCode()) ?? "",
                }),
              ),
            changed: async () =>
              (await service.services.setup.step()) === "admin" &&
              (await db().selectFrom("users").select("id").execute()).length === 0
                ? "nothing"
                : "the first admin was created",
          };
        },
      },
      {
        door: "web /register/{code}",
        refused: 422,
        words: page,
        async ready() {
          const { email: owner } = await newUser("owner");
          const browser = new WebClient(service.url);
          const codes: string[] = [];
          return {
            async attempt(bad, n) {
              const code = (await service.services.inviteCodes.create({ domain: "example.org", owner })).code;
              codes[n] = code;
              await browser.get(`/register/${code}`);
              return formAnswer("password")(
                await browser.post(`/register/${code}`, {
                  localPart: `newcomer${n}`,
                  password: bad,
                  passwordRepeat: bad,
                }),
              );
            },
            changed: async (n) => {
              const code = await service.services.inviteCodes.find(codes[n]!);
              if (!code || code.redeemedAt !== null) return "the invite code was used";
              return notCreated(`newcomer${n}@example.org`);
            },
          };
        },
      },
      {
        door: "web /account/password",
        refused: 422,
        words: page,
        async ready() {
          const { email } = await newUser("pw");
          const browser = new WebClient(service.url);
          await browser.signIn(email);
          await browser.get("/account/password");
          return {
            attempt: async (bad) =>
              formAnswer("newPassword")(
                await browser.post("/account/password", {
                  currentPassword: password,
                  newPassword: bad,
                  newPasswordRepeat: bad,
                }),
              ),
            changed: await passwordKept(email),
            signsIn: email,
          };
        },
      },
      {
        door: "web /recovery/reset (a ready recovery)",
        refused: 422,
        words: page,
        async ready() {
          const { email, recoveryToken } = await newUser("recover", { mailCrypt: true });
          assert.ok(recoveryToken);
          const started = now() - 3 * day;
          await db()
            .updateTable("users")
            .set({ recovery_start_time: started })
            .where("email", "=", email)
            .execute();
          const browser = new WebClient(service.url);
          await browser.get("/recovery");
          const kept = await passwordKept(email);
          return {
            attempt: async (bad) =>
              formAnswer("newPassword")(
                await browser.post("/recovery/reset", {
                  email,
                  token: recoveryToken,
                  newPassword: bad,
                  newPasswordRepeat: bad,
                }),
              ),
            changed: async () => {
              const [row] = await rowsOf(email);
              if (row?.recovery_start_time !== started) return "the recovery was used up";
              return kept();
            },
            signsIn: email,
          };
        },
      },
      {
        door: "web /admin/users/new",
        refused: 422,
        words: page,
        async ready() {
          const browser = await adminBrowser();
          const emails: string[] = [];
          return {
            async attempt(bad, n) {
              emails[n] = fresh("created");
              await browser.get("/admin/users/new");
              return formAnswer("password")(
                await browser.post("/admin/users/new", {
                  email: emails[n]!,
                  password: bad,
                  passwordRepeat: bad,
                }),
              );
            },
            changed: (n) => notCreated(emails[n]!),
          };
        },
      },
      {
        door: "web /admin/users/{email}/reset",
        refused: 422,
        words: page,
        async ready() {
          const browser = await adminBrowser();
          const { email } = await newUser("reset");
          const path = `/admin/users/${encodeURIComponent(email)}/reset`;
          return {
            async attempt(bad) {
              await browser.get(path);
              return formAnswer("password")(await browser.post(path, { password: bad, passwordRepeat: bad }));
            },
            changed: await passwordKept(email),
            signsIn: email,
          };
        },
      },
      {
        door: "web /admin/users/{email}/restore",
        refused: 422,
        words: page,
        async ready() {
          const browser = await adminBrowser();
          const { email } = await newUser("restore");
          await service.services.lifecycle.delete(email, byTest);
          const path = `/admin/users/${encodeURIComponent(email)}/restore`;
          return {
            async attempt(bad) {
              await browser.get(path);
              return formAnswer("password")(await browser.post(path, { password: bad, passwordRepeat: bad }));
            },
            changed: async () => ((await rowsOf(email))[0]?.deleted ? "nothing" : "the user was restored"),
          };
        },
      },
      {
        door: "API POST /api/admin/users",
        refused: 422,
        words: api,
        async ready() {
          const emails: string[] = [];
          return {
            async attempt(bad, n) {
              emails[n] = fresh("apicreated");
              return jsonAnswer(
                await service.api("POST", "/api/admin/users", {
                  token: adminToken,
                  json: { email: emails[n], password: bad },
                }),
              );
            },
            changed: (n) => notCreated(emails[n]!),
          };
        },
      },
      {
        door: "API POST /api/admin/users/{email}/reset",
        refused: 422,
        words: api,
        async ready() {
          const { email } = await newUser("apireset");
          return {
            attempt: async (bad) =>
              jsonAnswer(
                await service.api("POST", `/api/admin/users/${email}/reset`, {
                  token: adminToken,
                  json: { password: bad },
                }),
              ),
            changed: await passwordKept(email),
            signsIn: email,
          };
        },
      },
      {
        door: "API POST /api/admin/users/{email}/restore",
        refused: 422,
        words: api,
        async ready() {
          const { email } = await newUser("apirestore");
          await service.services.lifecycle.delete(email, byTest);
          return {
            attempt: async (bad) =>
              jsonAnswer(
                await service.api("POST", `/api/admin/users/${email}/restore`, {
                  token: adminToken,
                  json: { password: bad },
                }),
              ),
            changed: async () => ((await rowsOf(email))[0]?.deleted ? "nothing" : "the user was restored"),
          };
        },
      },
      {
        door: "API POST /api/admin/users/import (CSV)",
        refused: 422,
        words: api,
        async ready() {
          // A good line (a random password) before the bad one: while any line is bad, nothing is created.
          const lines: [good: string, bad: string][] = [];
          return {
            async attempt(bad, n) {
              lines[n] = [fresh("importok"), fresh("imported")];
              const answer = await service.api("POST", "/api/admin/users/import", {
                token: adminToken,
                csv: `email,password\r\n${lines[n]![0]},\r\n${lines[n]![1]},${bad}\r\n`,
              });
              const problems = answer.body?.lines;
              return {
                status: answer.status,
                said:
                  Array.isArray(problems) && problems.length === 1 && problems[0].line === 3
                    ? String(problems[0].problems)
                    : importSummary(answer.body),
              };
            },
            changed: async (n) => {
              const [good, bad] = lines[n]!;
              const found: string[] = [];
              for (const email of [good, bad]) if ((await rowsOf(email)).length > 0) found.push(email);
              return found.length === 0 ? "nothing" : `created: ${found.join(", ")}`;
            },
          };
        },
      },
      {
        door: "API POST /api/webmail/password",
        refused: 422,
        words: (bad) => webmailWords[bad.refusal.code]!,
        async ready() {
          const { email } = await newUser("webmail");
          return {
            attempt: async (bad) =>
              jsonAnswer(
                await service.api("POST", "/api/webmail/password", {
                  token: adminToken,
                  json: { email, password, newPassword: bad },
                }),
              ),
            changed: await passwordKept(email),
            signsIn: email,
          };
        },
      },
      {
        door: "console app:user:create",
        refused: "exit 1",
        words: consoleWords,
        async ready() {
          const emails: string[] = [];
          return {
            async attempt(bad, n) {
              emails[n] = fresh("console");
              return consoleAnswer(
                await runConsole(
                  dir.url,
                  ["app:user:create", "-u", emails[n]!, "--password", bad],
                  consoleEnv,
                ),
              );
            },
            changed: (n) => notCreated(emails[n]!),
          };
        },
      },
      {
        door: "console app:user:password",
        refused: "exit 1",
        words: consoleWords,
        async ready() {
          const { email } = await newUser("consolepw");
          return {
            attempt: async (bad) =>
              consoleAnswer(
                await runConsole(
                  dir.url,
                  ["app:user:password", "-u", email, "--old-password", password, "--password", bad],
                  consoleEnv,
                ),
              ),
            changed: await passwordKept(email),
            signsIn: email,
          };
        },
      },
    ];

    const seen: Record<string, unknown>[] = [];
    const wanted: Record<string, unknown>[] = [];
    const signIns: { door: string; oldPasswordSignsIn: boolean }[] = [];
    for (const door of doors) {
      const started = performance.now();
      const { attempt, changed, signsIn } = await door.ready();
      for (const [n, bad] of badPasswords.entries()) {
        const answer = await attempt(bad.password, n);
        seen.push({ door: door.door, input: bad.input, ...answer, changed: await changed(n) });
        wanted.push({
          door: door.door,
          input: bad.input,
          status: door.refused,
          said: door.words(bad),
          changed: "nothing",
        });
      }
      if (signsIn) signIns.push({ door: door.door, oldPasswordSignsIn: await oldPasswordSignsIn(signsIn) });
      t.diagnostic(`${door.door}: ${Math.round(performance.now() - started)} ms`);
    }
    t.diagnostic(`\n${table(seen)}`);
    t.diagnostic(`\n${table(signIns)}`);
    // One comparison: every door that answers otherwise is named in the diff.
    assert.deepEqual(
      { doors: seen, signIns },
      { doors: wanted, signIns: signIns.map(({ door }) => ({ door, oldPasswordSignsIn: true })) },
    );
  });

  test("ten wrong current passwords: every door that re-confirms refuses the first ones, then throttles (the right one too), at the same count", async (t) => {
    const otherPassword = "a perfectly good new passphrase";
    type Attempt = { status: number; retryAfter: string | null; said: string | null };
    interface ConfirmDoor {
      door: string;
      /** The status of a wrong password (the webmail's plugin expects 401). */
      wrong: number;
      /** What the door says for a wrong password, and while throttled. */
      words: { wrong: string; throttled: (retryAfter: number) => string };
      ready(): Promise<{ attempt(current: string): Promise<Attempt>; changed(): Promise<string> }>;
    }
    const pageWords = {
      wrong: refusalWords(passwordWrong),
      throttled: (retryAfter: number) => refusalWords(signInThrottled, { retryAfter }),
    };
    /** A settings page of a signed-in user (its form shown once): the form posted with `current` in `field`. */
    const settingsPage = async (
      path: string,
      field: string,
      form: Record<string, string>,
      browser: WebClient,
    ) => {
      const shown = await browser.get(path.startsWith("/account/twofactor") ? "/account/twofactor" : path);
      assert.equal(shown.status, 200, `${path}: the form`);
      return {
        async attempt(current: string): Promise<Attempt> {
          // Each answer is the form again, with its CSRF token: posted again at once, as a guesser would.
          const answer = await browser.post(path, { ...form, [field]: current });
          return {
            status: answer.status,
            retryAfter: answer.retryAfter,
            said: shownError(answer.text, field),
          };
        },
      };
    };
    const signedIn = async (what: string, extra: { mailCrypt?: boolean; roles?: string[] } = {}) => {
      const user = await newUser(what, extra);
      const browser = new WebClient(service.url);
      await browser.signIn(user.email);
      return { user, browser };
    };

    const doors: ConfirmDoor[] = [
      {
        door: "web /account/password",
        wrong: 422,
        words: pageWords,
        async ready() {
          const { user, browser } = await signedIn("cpw");
          const form = { newPassword: otherPassword, newPasswordRepeat: otherPassword };
          return {
            ...(await settingsPage("/account/password", "currentPassword", form, browser)),
            changed: await passwordKept(user.email),
          };
        },
      },
      {
        door: "web /account/recovery-token",
        wrong: 422,
        words: pageWords,
        async ready() {
          const { user, browser } = await signedIn("crt", { mailCrypt: true });
          const box = (await rowsOf(user.email))[0]?.recovery_secret_box;
          return {
            ...(await settingsPage("/account/recovery-token", "password", {}, browser)),
            changed: async () =>
              (await rowsOf(user.email))[0]?.recovery_secret_box === box ? "nothing" : "a new recovery token",
          };
        },
      },
      {
        door: "web /account/delete",
        wrong: 422,
        words: pageWords,
        async ready() {
          const { user, browser } = await signedIn("cdel");
          return {
            ...(await settingsPage("/account/delete", "password", {}, browser)),
            changed: async () =>
              (await rowsOf(user.email))[0]?.deleted ? "the account was deleted" : "nothing",
          };
        },
      },
      {
        door: "web /account/twofactor/enable",
        wrong: 422,
        words: pageWords,
        async ready() {
          const { browser } = await signedIn("c2fa");
          return {
            ...(await settingsPage("/account/twofactor/enable", "password", {}, browser)),
            // An offered secret waits in the session for its confirmation; none was offered.
            changed: async () =>
              (await browser.get("/account/twofactor/confirm")).status === 303
                ? "nothing"
                : "a secret was offered",
          };
        },
      },
      {
        door: "web /account/openpgp/delete/{email}",
        wrong: 422,
        words: pageWords,
        async ready() {
          const { user, browser } = await signedIn("cpgp");
          const { publicKey } = await openpgp.generateKey({
            userIDs: [{ email: user.email }],
            format: "armored",
          });
          const stored = await service.services.users.get(user.email);
          await service.services.openPgpIdentities.upload(stored, user.email, publicKey);
          const hasKey = async () =>
            (await service.services.openPgpIdentities.list(stored)).some(
              (i) => i.email === user.email && i.key,
            );
          assert.ok(await hasKey());
          return {
            ...(await settingsPage(
              `/account/openpgp/delete/${encodeURIComponent(user.email)}`,
              "password",
              {},
              browser,
            )),
            changed: async () => ((await hasKey()) ? "nothing" : "the key was deleted"),
          };
        },
      },
      {
        door: "web /admin/domains/{name}/delete",
        wrong: 422,
        words: pageWords,
        async ready() {
          const { browser } = await signedIn("cadmin", { roles: ["ROLE_ADMIN"] });
          const name = `gone${++serial}.example`;
          await service.services.domains.create(name);
          return {
            ...(await settingsPage(`/admin/domains/${name}/delete`, "password", { force: "yes" }, browser)),
            changed: async () =>
              (await service.services.domains.find(name)) ? "nothing" : "the domain was deleted",
          };
        },
      },
      {
        door: "API POST /api/webmail/password",
        wrong: 401,
        words: { wrong: "Bad credentials", throttled: () => signInThrottled.apiText({ retryAfter: 0 }) },
        async ready() {
          const { email } = await newUser("cwebmail");
          return {
            async attempt(current) {
              const answer = await service.api("POST", "/api/webmail/password", {
                token: adminToken,
                json: { email, password: current, newPassword: otherPassword },
              });
              return {
                status: answer.status,
                retryAfter: answer.headers.get("retry-after"),
                said: answer.body?.message ?? null,
              };
            },
            changed: await passwordKept(email),
          };
        },
      },
    ];

    const attempts = 10;
    const free = clientPolicy.freeFailures;
    const seen: Record<string, unknown>[] = [];
    const wanted: Record<string, unknown>[] = [];
    for (const door of doors) {
      const started = performance.now();
      await forgetFailures();
      const { attempt, changed } = await door.ready();
      const answers: Attempt[] = [];
      for (let i = 1; i <= attempts; i++) answers.push(await attempt(`wrong guess number ${i}`));
      answers.push(await attempt(password));
      const statuses = answers.map((a) => a.status);
      const throttledAt = statuses.indexOf(429) + 1;
      const firstThrottled = answers[throttledAt - 1];
      const retryAfter = Number(firstThrottled?.retryAfter ?? Number.NaN);
      seen.push({
        door: door.door,
        statuses: statuses.join(" "),
        "first 429 (attempt)": throttledAt,
        "Retry-After": answers.map((a) => a.retryAfter ?? "-").join(" "),
        "said (wrong)": answers[0]?.said,
        "said (throttled)": firstThrottled?.said,
        changed: await changed(),
      });
      const expected = [...Array(free).fill(door.wrong), ...Array(attempts + 1 - free).fill(429)];
      wanted.push({
        door: door.door,
        statuses: expected.join(" "),
        "first 429 (attempt)": free + 1,
        "Retry-After": answers
          .map((_, i) => (i < free ? "-" : (answers[i]?.retryAfter ?? "missing")))
          .join(" "),
        "said (wrong)": door.words.wrong,
        "said (throttled)": door.words.throttled(retryAfter),
        changed: "nothing",
      });
      for (const answer of answers.slice(free)) {
        const seconds = Number(answer.retryAfter);
        assert.ok(
          Number.isInteger(seconds) && seconds > 0 && seconds <= clientPolicy.firstDelay,
          `${door.door}: Retry-After ${answer.retryAfter}`,
        );
      }
      t.diagnostic(`${door.door}: ${Math.round(performance.now() - started)} ms`);
    }
    await forgetFailures();
    t.diagnostic(`\n${table(seen)}`);
    assert.deepEqual(seen, wanted);
  });
});

// ---- the database cut off

const server = process.env.TEST_DATABASE_URL ?? "";
const cutOffTitle = "the database cut off: the API and the pages answer 503, and the log has no error for it";
const cutOffSkip = /^(postgres(ql)?|mysql|mariadb):\/\//.test(server)
  ? false
  : "needs TEST_DATABASE_URL (PostgreSQL or MariaDB): an SQLite file cannot be cut off through a TCP proxy";

if (cutOffSkip) test(cutOffTitle, { skip: cutOffSkip }, () => {});
else
  test(cutOffTitle, async (t) => {
    const fresh = await freshDatabaseUrl(join(tmpdir(), "unused.sqlite"));
    const direct = new URL(fresh.url);
    const proxy = new TcpProxy({ host: direct.hostname, port: Number(direct.port) });
    await proxy.start();
    const proxied = new URL(fresh.url);
    proxied.port = String(proxy.port);
    const log: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        log.push(...String(chunk).split("\n").filter(Boolean));
        done();
      },
    });
    let running: Running | undefined;
    try {
      running = await serve(proxied.toString(), { log: sink });
      const { domains, users, tokens } = running.services;
      await domains.create("example.org");
      await users.create({ email: "alice@example.org", password });
      const token = (await tokens.create("cut off", ["admin"])).plainToken;
      const browser = new WebClient(running.url);
      await browser.signIn("alice@example.org");
      const reachable = {
        api: (await running.api("GET", "/api/admin/users", { token })).status,
        login: (await new WebClient(running.url).get("/login")).status,
        account: (await browser.get("/account")).status,
      };
      assert.deepEqual(reachable, { api: 200, login: 200, account: 200 }, "while the database answers");

      await proxy.stop();
      const api = await running.api("GET", "/api/admin/users", { token });
      const login = await new WebClient(running.url).get("/login");
      const account = await browser.get("/account");
      const unavailable = en("error.unavailable");
      const rows = [
        {
          door: "API GET /api/admin/users",
          status: api.status,
          said: api.body?.message ?? api.text.slice(0, 200),
        },
        {
          door: "web GET /login",
          status: login.status,
          said: asRead(login.text).includes(unavailable) ? unavailable : "(no error.unavailable text)",
        },
        {
          door: "web GET /account (signed in)",
          status: account.status,
          said: asRead(account.text).includes(unavailable) ? unavailable : "(no error.unavailable text)",
        },
      ];
      t.diagnostic(`\n${table(rows)}`);
      assert.deepEqual(rows, [
        { door: "API GET /api/admin/users", status: 503, said: "database unavailable, try again" },
        { door: "web GET /login", status: 503, said: unavailable },
        { door: "web GET /account (signed in)", status: 503, said: unavailable },
      ]);
      assert.match(api.headers.get("content-type") ?? "", /^application\/json/);
      const errors = log.filter((line) => {
        try {
          return (JSON.parse(line) as { level?: number }).level! >= 50;
        } catch {
          return false;
        }
      });
      assert.deepEqual(errors, [], "no error-level log line for an unreachable database");
      assert.ok(
        log.some((line) => line.includes('"msg":"database unavailable"')),
        "the outage is logged as unavailability",
      );
    } finally {
      await proxy.start().catch(() => {});
      await running?.close();
      await proxy.stop();
      await fresh.drop();
    }
  });
