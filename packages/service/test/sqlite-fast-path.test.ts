/**
 * On SQLite the integration API's fast path answers without a promise: the token check and every
 * per-message lookup give their answer as a value, so a lookup is answered within the I/O callback
 * that read its request (http/integration/eventually.ts). A lookup that starts answering with a
 * promise (an `async` slipped in, a read through Kysely) fails here. SQLite only: the database
 * runs leave this file out.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { parseAddress } from "../src/accounts/addresses.ts";
import { CryptoPool } from "../src/credentials/crypto-pool.ts";
import { type DatabaseHandle, openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import { MessageLookups } from "../src/http/integration/lookups.ts";
import { createServices, type Services } from "../src/services.ts";
import { installationSecret } from "./helpers/service.ts";

let dir: string;
let handle: DatabaseHandle;
let services: Services;
let lookups: MessageLookups;
let plainToken: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "mas-fast-path-"));
  handle = await openDatabase(`sqlite:${join(dir, "fast.sqlite")}`);
  await migrateToLatest(handle);
  services = createServices(handle, new CryptoPool(2), { installationSecret: installationSecret() });
  await services.domains.create("example.org");
  await services.users.create({ email: "alice@example.org", password: "correct horse battery staple" });
  await services.aliases.create({ source: "team@example.org", destinations: ["alice@example.org"] });
  plainToken = (await services.tokens.create("fast path", ["mta"])).plainToken;
  lookups = new MessageLookups(handle, services.settings, services.tokens);
  // The token's first use is recorded (a write, so a promise); every later check within five
  // minutes is a read alone.
  await lookups.authenticate(plainToken);
  await new Promise((resolve) => setImmediate(resolve));
});

after(async () => {
  await handle.close();
  rmSync(dir, { recursive: true, force: true });
});

const address = (raw: string) => {
  const parsed = parseAddress(raw);
  assert.ok(parsed);
  return parsed;
};

function answersAtOnce<T>(name: string, answer: T | Promise<T>): T {
  assert.ok(!(answer instanceof Promise), `${name} answered with a promise`);
  return answer as T;
}

test("the token check and every per-message lookup answer with a value, found or not", () => {
  assert.deepEqual(answersAtOnce("token check", lookups.authenticate(plainToken))?.scopes, ["mta"]);
  assert.equal(answersAtOnce("unknown token", lookups.authenticate("f".repeat(64))), null);
  assert.equal(answersAtOnce("domain", lookups.isManagedDomain("example.org")), true);
  assert.equal(answersAtOnce("unknown domain", lookups.isManagedDomain("example.com")), false);
  assert.equal(answersAtOnce("mailbox", lookups.hasMailbox(address("alice@example.org"))), true);
  assert.equal(answersAtOnce("unknown mailbox", lookups.hasMailbox(address("bob@example.org"))), false);
  assert.deepEqual(answersAtOnce("alias", lookups.aliasDestinations(address("team@example.org"))), [
    "alice@example.org",
  ]);
  assert.deepEqual(answersAtOnce("unknown alias", lookups.aliasDestinations(address("x@example.org"))), []);
  assert.deepEqual(answersAtOnce("senders", lookups.senders(address("team@example.org"))), [
    "alice@example.org",
  ]);
  assert.deepEqual(answersAtOnce("smtp_quota", lookups.smtpQuota(address("alice@example.org"))), {
    per_hour: 0,
    per_day: 0,
  });
  assert.equal(answersAtOnce("unknown smtp_quota", lookups.smtpQuota(address("bob@example.org"))), null);
  assert.equal(answersAtOnce("userdb", lookups.userdb(address("alice@example.org")))?.mailCrypt, 2);
  assert.equal(answersAtOnce("unknown userdb", lookups.userdb(address("bob@example.org"))), null);
});

test("while a transaction holds the writing connection, lookups still answer at once", async () => {
  const held = Promise.withResolvers<void>();
  const started = Promise.withResolvers<void>();
  const transaction = handle.db.transaction().execute(async (trx) => {
    await trx.updateTable("users").set({ quota: 1 }).where("email", "=", "alice@example.org").execute();
    started.resolve();
    await held.promise;
  });
  await started.promise;
  assert.equal(answersAtOnce("userdb", lookups.userdb(address("alice@example.org")))?.quota, "");
  held.resolve();
  await transaction;
});
