/**
 * Dovecot 2.4 (Debian 13) with the shipped adapter and its 2.4 snippet: the IMAP and LMTP checks of
 * mail-host.test.ts, with Dovecot run by chroot from a Debian 13 tree that
 * scripts/debian13-dovecot-tree.sh makes once (debootstrap; .ci/run calls it) and keeps in
 * /var/cache/mail-account-service/debian13-dovecot. Without the tree the test says why and skips.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  api,
  consoleAdminToken,
  createToken,
  type Dovecot,
  type Gateway,
  missingPrerequisite,
  PASSWORD,
  removeDirectory,
  ServiceProcess,
  startDovecot,
  startGateway,
  waitFor,
} from "./host.ts";
import { ImapSession, message, readInbox, SmtpSession } from "./protocols.ts";

const TREE = process.env.DEBIAN13_DOVECOT_TREE ?? "/var/cache/mail-account-service/debian13-dovecot";

function whyNot(): string | null {
  const missing = missingPrerequisite([]);
  if (missing) return missing;
  if (!existsSync(`${TREE}/.complete`)) {
    return `no Debian 13 tree with Dovecot 2.4 at ${TREE} (scripts/debian13-dovecot-tree.sh makes it with debootstrap; .ci/run runs it, and a failed debootstrap is reported there)`;
  }
  for (const file of ["usr/sbin/dovecot", "usr/lib/dovecot/modules/auth/libauthdb_lua.so"]) {
    if (!existsSync(`${TREE}/${file}`)) return `the Debian 13 tree at ${TREE} lacks /${file}`;
  }
  return null;
}

const skip = whyNot();
if (skip) console.log(`# Dovecot 2.4 skipped: ${skip}`);

describe("Dovecot 2.4 through contrib/dovecot", { skip: skip ?? false }, () => {
  let dir: string;
  let inside: string;
  let service: ServiceProcess;
  let gateway: Gateway;
  let dovecot: Dovecot;
  let admin: string;
  let client = 0;

  const login = async (user: string, password: string) => {
    const imap = await ImapSession.open(dovecot.imapPort);
    try {
      await imap.command(`ID ("x-originating-ip" "203.0.113.${++client}")`);
      return await imap.login(user, password);
    } finally {
      await imap.close();
    }
  };

  const lmtp = async (to: string, text: string) => {
    const session = await SmtpSession.open(dovecot.lmtpPort);
    try {
      await session.command("LHLO test.client");
      await session.command("MAIL FROM:<sender@sender.test>");
      const rcpt = await session.command(`RCPT TO:<${to}>`);
      if (rcpt.code !== 250) return { rcpt: rcpt.code, data: 0, text: rcpt.text };
      const [data] = await session.data(text);
      return { rcpt: rcpt.code, data: data?.code ?? 0, text: data?.text ?? "" };
    } finally {
      await session.close();
    }
  };

  before(async () => {
    const started = Date.now();
    // The instance lives inside the tree (Dovecot sees it as /tmp/mail-host24-...).
    dir = mkdtempSync(join(TREE, "tmp", "mail-host24-"));
    inside = dir.slice(TREE.length);
    const databaseUrl = `sqlite:${dir}/service.sqlite`;
    service = await ServiceProcess.start({ DATABASE_URL: databaseUrl });
    admin = consoleAdminToken(databaseUrl);
    const token = await createToken(service.url, admin, "dovecot", "mailbox-server");
    const call = (method: string, path: string, json?: unknown) =>
      api(service.url, admin, method, path, json);
    assert.equal((await call("POST", "/api/admin/domains", { name: "example.org" })).status, 201);
    for (const [email, fields] of [
      ["alice@example.org", { mailCrypt: true, quota: 100 }],
      ["wrong@example.org", {}],
      ["spam@example.org", { roles: ["ROLE_SPAM"] }],
      ["expired@example.org", { passwordChangeRequired: true }],
    ] as const) {
      const created = await call("POST", "/api/admin/users", { email, password: PASSWORD, ...fields });
      assert.equal(created.status, 201, JSON.stringify(created.body));
    }
    gateway = await startGateway(service.url);
    dovecot = await startDovecot({
      generation: "2.4",
      root: TREE,
      dir: inside,
      serviceUrl: gateway.url,
      token,
      timeout: "5s",
    });
    console.log(
      `# Dovecot 2.4 (${readFileSync(`${TREE}/.complete`, "utf8").trim()}) up in ${Date.now() - started} ms`,
    );
  });

  after(async () => {
    await dovecot?.stop();
    await gateway?.close();
    await service?.stop();
    if (dir && !process.env.MAIL_HOST_KEEP) removeDirectory(dir);
  });

  test("LMTP for a MailCrypt user: stored encrypted, read over IMAP with the password; quota from the service", async () => {
    const secret = `crypt24-${randomBytes(6).toString("hex")}`;
    const delivered = await lmtp(
      "alice@example.org",
      message("sender@sender.test", "alice@example.org", secret),
    );
    assert.equal(delivered.data, 250, delivered.text);
    const maildir = join(dovecot.mailRoot, "example.org", "alice", "Maildir");
    const files = ["new", "cur"].flatMap((sub) =>
      existsSync(join(maildir, sub))
        ? readdirSync(join(maildir, sub)).map((name) => join(maildir, sub, name))
        : [],
    );
    assert.ok(files.length > 0);
    for (const file of files) {
      const stored = readFileSync(file);
      assert.equal(stored.subarray(0, 7).toString("latin1"), "CRYPTED");
      assert.ok(!stored.includes(secret));
    }
    const inbox = await readInbox(dovecot.imapPort, "alice@example.org", PASSWORD);
    assert.ok(inbox.some((mail) => mail.includes(`body of ${secret}`)));

    const imap = await ImapSession.open(dovecot.imapPort);
    try {
      assert.equal((await imap.login("alice@example.org", PASSWORD)).status, "OK");
      assert.match((await imap.command("GETQUOTAROOT INBOX")).untagged, /STORAGE \d+ 102400\)/);
    } finally {
      await imap.close();
    }
  });

  test("passdb and userdb answers: refused, disabled, expired, unknown; the client's address goes along", async () => {
    gateway.seen.length = 0;
    assert.match(
      (await login("wrong@example.org", "not the password at all")).text,
      /^NO \[AUTHENTICATIONFAILED\]/,
    );
    assert.match((await login("nobody@example.org", PASSWORD)).text, /^NO \[AUTHENTICATIONFAILED\]/);
    assert.match((await login("spam@example.org", PASSWORD)).text, /^NO \[AUTHENTICATIONFAILED\]/);
    assert.match((await login("expired@example.org", PASSWORD)).text, /^NO \[EXPIRED\]/);
    const unknown = await lmtp("nobody@example.org", message("a@b.test", "nobody@example.org", "x"));
    assert.equal(unknown.rcpt, 550, unknown.text);
    const passdb = gateway.seen.find(
      (request) => request.method === "POST" && request.path.endsWith("/wrong@example.org"),
    );
    assert.ok(passdb);
    assert.match(String(passdb.headers["x-client-address"]), /^203\.0\.113\.\d+$/);
    await waitFor("the log lines", () => {
      const log = dovecot.log();
      return /user disabled/.test(log) && /password expired/.test(log);
    });
  });

  test("a service answering 500, not answering, or stopped: temporary failures", async () => {
    try {
      gateway.mode = "error500";
      assert.match((await login("alice@example.org", PASSWORD)).text, /^NO \[UNAVAILABLE\]/);
      gateway.mode = "hang";
      assert.match((await login("alice@example.org", PASSWORD)).text, /^NO \[UNAVAILABLE\]/);
      assert.equal(
        (await lmtp("alice@example.org", message("a@b.test", "alice@example.org", "x"))).rcpt,
        451,
      );
    } finally {
      gateway.mode = "pass";
    }
    await service.stop();
    try {
      assert.match((await login("alice@example.org", PASSWORD)).text, /^NO \[UNAVAILABLE\]/);
      assert.equal(
        (await lmtp("alice@example.org", message("a@b.test", "alice@example.org", "x"))).rcpt,
        451,
      );
    } finally {
      await service.start();
    }
    assert.equal((await login("alice@example.org", PASSWORD)).status, "OK");
  });

  test("Dovecot's log holds no password and no private key, and no failed read of an encrypted mail", () => {
    const log = dovecot.log();
    assert.doesNotMatch(log, new RegExp(PASSWORD));
    assert.doesNotMatch(log, /LS0tLS1CRUdJTiBQUklWQVRF/);
    assert.doesNotMatch(log, /Private key not available/);
    assert.doesNotMatch(log, /Invalid HTTP client setting|Unknown setting/);
  });
});
