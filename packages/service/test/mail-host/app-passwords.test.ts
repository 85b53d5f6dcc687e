/**
 * App passwords on the real mail host (issue 29): Dovecot 2.3 with the shipped Lua passdb, Postfix
 * with the shipped lines and the Postfix adapter's SASL server, the service on SQLite. App passwords
 * are made the way their owner makes them (the password re-confirmed, then AppPasswordService),
 * through the services opened in this process on the service's own database and installation
 * secret, as the console does.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import type { SecurityEventOrigin } from "../../src/accounts/security-events.ts";
import { CryptoPool } from "../../src/credentials/crypto-pool.ts";
import { currentTotpCode } from "../../src/credentials/totp.ts";
import { type DatabaseHandle, openDatabase } from "../../src/db/database.ts";
import { createServices, type Services } from "../../src/services.ts";
import { testInstallationSecret } from "../helpers/process.ts";
import { installationSecret } from "../helpers/service.ts";
import { WebClient } from "../helpers/web-client.ts";
import {
  type Adapter,
  api,
  consoleAdminToken,
  createToken,
  type Dovecot,
  freePort,
  hostDirectory,
  missingPrerequisite,
  PASSWORD,
  type Postfix,
  removeDirectory,
  ServiceProcess,
  startAdapter,
  startDovecot,
  startPostfix,
  waitFor,
} from "./host.ts";
import {
  ImapSession,
  lmtpDeliver,
  marker,
  message,
  readInbox,
  SmtpSession,
  storedMessages,
  submitMessage,
} from "./protocols.ts";

const missing = missingPrerequisite([
  "/usr/sbin/dovecot",
  "/usr/lib/dovecot/imap",
  "/usr/lib/dovecot/lmtp",
  "/usr/lib/dovecot/modules/auth/libauthdb_lua.so",
  "/usr/share/lua/5.4/cjson/util.lua",
  "/usr/sbin/postfix",
]);
if (missing && process.env.CI === "true") throw new Error(`the mail host cannot run in CI: ${missing}`);
if (missing) console.log(`# mail host (app passwords) skipped: ${missing}`);

/** The TOTP secret of the user whose web sign-in takes a second factor. */
const TOTP_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DP";
/** The owner making their own app passwords, as on the account page. */
const byOwner: SecurityEventOrigin = { door: "web", clientAddress: "192.0.2.1", actor: null };

let dir: string;
let service: ServiceProcess;
let admin: string;
let adapter: Adapter;
let dovecot: Dovecot;
let postfix: Postfix;
let database: DatabaseHandle;
let services: Services;
const cleanups: (() => Promise<void> | void)[] = [];
/** Every app password made here, for the log check. */
const made: string[] = [];

const adminApi = (method: string, path: string, json?: unknown) =>
  api(service.url, admin, method, path, json);

async function createUser(email: string, fields: Record<string, unknown> = {}): Promise<void> {
  const answer = await adminApi("POST", "/api/admin/users", { email, password: PASSWORD, ...fields });
  assert.equal(answer.status, 201, JSON.stringify(answer.body));
}

async function user(email: string) {
  const found = await services.users.findByEmail(email);
  assert.ok(found, email);
  return found;
}

/** A new app password of the user's, made by the user (password re-confirmed): its id and value. */
async function appPassword(email: string, scope: "mail" | "smtp", name = "Phone") {
  const proof = await services.signIn.confirmPassword(await user(email), PASSWORD, { door: "web" });
  const created = await services.appPasswords.createForOwner(proof, { name, scope }, byOwner);
  assert.match(created.password, /^[a-z2-9]{4}(-[a-z2-9]{4}){3}$/);
  made.push(created.password);
  return created;
}

/** SMTP AUTH alone (no message): the AUTH reply's code. */
/** LMTP straight to Dovecot: the DATA answer for the one recipient. */
async function lmtpData(to: string, text: string): Promise<number> {
  return (await lmtpDeliver(dovecot.lmtpPort, to, text)).data;
}

/** Submits a message to bob with this password, through Postfix and the adapter, and waits for it in bob's INBOX. */
async function sendToBob(email: string, password: string, label: string): Promise<void> {
  const secret = marker(label);
  const sent = await submitMessage(
    postfix.submissionPort,
    email,
    password,
    email,
    "bob@example.org",
    message(email, "bob@example.org", secret),
  );
  assert.deepEqual([sent.stage, sent.code], ["DATA", 250], sent.text);
  await waitFor(`${label}: the message in bob's INBOX`, () =>
    inboxHas("bob@example.org", PASSWORD, `body of ${secret}`),
  );
}

async function smtpAuth(login: string, password: string): Promise<number> {
  const session = await SmtpSession.open(postfix.submissionPort);
  try {
    await session.command("EHLO client.sender.test");
    assert.equal((await session.startTls()).code, 220);
    await session.command("EHLO client.sender.test");
    return (await session.authPlain(login, password)).code;
  } finally {
    await session.close();
  }
}

let lastClient = 0;
/** IMAP LOGIN from a client address of its own (no Dovecot auth penalty between the tests' failures). */
async function imapLogin(login: string, password: string) {
  const imap = await ImapSession.open(dovecot.imapPort);
  try {
    await imap.command(`ID ("x-originating-ip" "198.51.100.${++lastClient}")`);
    return await imap.login(login, password);
  } finally {
    await imap.close();
  }
}

async function inboxHas(email: string, password: string, text: string): Promise<boolean> {
  return (await readInbox(dovecot.imapPort, email, password)).some((mail) => mail.includes(text));
}

describe("app passwords on the mail host", { skip: missing ?? false }, () => {
  before(async () => {
    const started = Date.now();
    dir = hostDirectory();
    cleanups.push(() => {
      if (process.env.MAIL_HOST_KEEP) console.log(`# mail host kept in ${dir}`);
      else removeDirectory(dir);
    });
    const databaseUrl = `sqlite:${dir}/service.sqlite`;
    // One installation secret for the service and the services of this process: app passwords are
    // found by a hash keyed with it.
    service = await ServiceProcess.start({
      DATABASE_URL: databaseUrl,
      INSTALLATION_SECRET: testInstallationSecret,
    });
    cleanups.push(() => service.stop());
    database = await openDatabase(databaseUrl, { poolSize: 2 });
    cleanups.push(() => database.close());
    services = createServices(database, new CryptoPool(2), { installationSecret: installationSecret() });
    admin = consoleAdminToken(databaseUrl);
    const mailboxToken = await createToken(service.url, admin, "dovecot", "mailbox-server");
    const mtaToken = await createToken(service.url, admin, "postfix", "mta");
    assert.equal((await adminApi("POST", "/api/admin/domains", { name: "example.org" })).status, 201);
    await Promise.all([
      createUser("alice@example.org", { mailCrypt: true }),
      createUser("carol@example.org", { mailCrypt: true }),
      createUser("printer@example.org", { mailCrypt: true }),
      createUser("dave@example.org", { mailCrypt: true }),
      createUser("bob@example.org", { mailCrypt: false }),
    ]);

    adapter = await startAdapter(service.url, mtaToken);
    cleanups.push(() => adapter.stop());
    const [smtpPort, imapPort, lmtpPort] = [await freePort(), await freePort(), await freePort()];
    postfix = await startPostfix({ dir: `${dir}/postfix`, adapter, lmtpPort, smtpPort });
    cleanups.push(() => postfix.stop());
    dovecot = await startDovecot({
      generation: "2.3",
      dir: `${dir}/dovecot`,
      serviceUrl: service.url,
      token: mailboxToken,
      timeout: "5s",
      submissionPort: smtpPort,
      imapPort,
      lmtpPort,
    });
    cleanups.push(() => dovecot.stop());
    console.log(`# mail host up in ${Date.now() - started} ms`);
  });

  after(async () => {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch (error) {
        console.log(`# cleanup: ${error}`);
      }
    }
  });

  test("an IMAP login with a mail app password reads an encrypted message", async () => {
    const { password } = await appPassword("alice@example.org", "mail");
    const secret = marker("crypt");
    assert.equal(
      await lmtpData("alice@example.org", message("sender@sender.test", "alice@example.org", secret)),
      250,
    );
    const stored = storedMessages(dovecot.mailRoot, "alice@example.org").map((file) => readFileSync(file));
    assert.ok(stored.length > 0);
    for (const file of stored) {
      assert.equal(file.subarray(0, 7).toString("latin1"), "CRYPTED");
      assert.ok(!file.includes(secret));
    }
    // Dovecot decrypts with the private key the app password's own box gave passdb.
    assert.ok(await inboxHas("alice@example.org", password, `body of ${secret}`));
    // As a person types it: upper case, without the dashes.
    assert.ok(
      await inboxHas("alice@example.org", password.replaceAll("-", "").toUpperCase(), `body of ${secret}`),
    );
    // Not switched on: the account password still opens the mailbox too.
    assert.ok(await inboxHas("alice@example.org", PASSWORD, `body of ${secret}`));
    // An app password is the owner's only: another user's address with it fails.
    const other = await imapLogin("carol@example.org", password);
    assert.match(other.text, /^NO \[AUTHENTICATIONFAILED\]/);
  });

  test("'mail apps must use app passwords' on: the account password is refused over IMAP and SMTP, still signs in on the web with the second factor", async () => {
    const email = "carol@example.org";
    const totp = await adminApi("PUT", `/api/admin/users/${email}/totp`, {
      secret: TOTP_SECRET,
      backupCodes: ["123456"],
    });
    assert.equal(totp.status, 200, JSON.stringify(totp.body));
    const { password } = await appPassword(email, "mail");
    const secret = marker("required");
    assert.equal(await lmtpData(email, message("sender@sender.test", email, secret)), 250);
    // Before: both work.
    assert.equal((await imapLogin(email, PASSWORD)).status, "OK");
    assert.equal(await smtpAuth(email, PASSWORD), 235);

    await services.appPasswords.setRequired(await user(email), true, byOwner);

    // The ordinary failure, as for a wrong password: nothing tells a guesser the password was right.
    const imap = await imapLogin(email, PASSWORD);
    assert.equal(imap.status, "NO");
    assert.match(imap.text, /^NO \[AUTHENTICATIONFAILED\]/);
    const smtp = await submitMessage(
      postfix.submissionPort,
      email,
      PASSWORD,
      email,
      "bob@example.org",
      message(email, "bob@example.org", "x"),
    );
    assert.deepEqual([smtp.stage, smtp.code], ["AUTH", 535], smtp.text);
    // The app password still reads the encrypted mail and sends.
    assert.ok(await inboxHas(email, password, `body of ${secret}`));
    await sendToBob(email, password, "sent-with-app-password");

    // The web: password, then the second factor, then the account page.
    const web = new WebClient(service.url);
    await web.get("/login");
    const signIn = await web.post("/login", { email, password: PASSWORD });
    assert.equal(signIn.status, 303, signIn.text.slice(0, 500));
    assert.equal(signIn.location, "/2fa");
    await web.get("/2fa");
    const second = await web.post("/2fa", { code: currentTotpCode(TOTP_SECRET, Date.now()) });
    assert.equal(second.status, 303, second.text.slice(0, 500));
    assert.equal(second.location, "/account");
    const account = await web.get("/account");
    assert.equal(account.status, 200);
    assert.ok(account.text.includes(email));
    // The web never takes an app password.
    const withApp = new WebClient(service.url);
    await withApp.get("/login");
    assert.equal((await withApp.post("/login", { email, password })).status, 401);

    // Off again: the account password opens the mailbox once more.
    await services.appPasswords.setRequired(await user(email), false, byOwner);
    assert.equal((await imapLogin(email, PASSWORD)).status, "OK");
  });

  test("an SMTP-only app password sends mail through Postfix and the adapter, and is refused over IMAP", async () => {
    const email = "printer@example.org";
    const { password } = await appPassword(email, "smtp", "Printer");
    await sendToBob(email, password, "printed");
    await waitFor("Postfix's line of the authenticated submission", () =>
      new RegExp(`sasl_method=PLAIN, sasl_username=${email.replace(".", "\\.")}`).test(postfix.log()),
    );
    const imap = await imapLogin(email, password);
    assert.equal(imap.status, "NO");
    assert.match(imap.text, /^NO \[AUTHENTICATIONFAILED\]/);
  });

  test("a revoked app password is refused at once over IMAP and SMTP", async () => {
    const email = "dave@example.org";
    const created = await appPassword(email, "mail", "Old laptop");
    const kept = await appPassword(email, "mail", "New laptop");
    assert.equal((await imapLogin(email, created.password)).status, "OK");
    assert.equal(await smtpAuth(email, created.password), 235);

    await services.appPasswords.revoke(await user(email), created.id, byOwner);

    // No waiting: the very next sign-in is refused, at both doors.
    const imap = await imapLogin(email, created.password);
    assert.match(imap.text, /^NO \[AUTHENTICATIONFAILED\]/);
    assert.equal(await smtpAuth(email, created.password), 535);
    // The user's other app password and account password go on working.
    assert.equal((await imapLogin(email, kept.password)).status, "OK");
    assert.equal(await smtpAuth(email, kept.password), 235);
    assert.equal((await imapLogin(email, PASSWORD)).status, "OK");
  });

  test("Dovecot's and the adapter's logs hold no app password and no private key", async () => {
    assert.ok(made.length >= 5);
    const logs = `${dovecot.log()}\n${adapter.output()}\n${postfix.log()}\n${service.output()}`.toLowerCase();
    for (const password of made) {
      assert.ok(!logs.includes(password), "an app password in a log");
      assert.ok(!logs.includes(password.replaceAll("-", "")), "an app password in a log");
    }
    assert.doesNotMatch(logs, /LS0tLS1CRUdJTiBQUklWQVRF/); // base64 of "-----BEGIN PRIVATE"
    assert.doesNotMatch(logs, /Private key not available/);
  });
});
