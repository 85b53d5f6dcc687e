/**
 * What the sign-in guard adds to an honest sign-in, beside what the sign-in itself costs: on a
 * SQLite file through the service's own migrations, the wall time per `SignInGuard.attempt` with a
 * check that does nothing (a client that signed in before; a new client), and per real MailCrypt
 * passdb check (the two Argon2id derivations, the same pool), measured one after the other in one
 * process, so the two compare on the same machine at the same moment. Prints one JSON line.
 *
 *   node bench/guard-overhead.ts [attempts=2000] [signIns=16]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InstallationSecret } from "../packages/service/src/config.ts";
import { CryptoPool } from "../packages/service/src/credentials/crypto-pool.ts";
import { openDatabase } from "../packages/service/src/db/database.ts";
import { migrateToLatest } from "../packages/service/src/db/migrate.ts";
import { createServices } from "../packages/service/src/services.ts";

const attempts = Number(process.argv[2] ?? 2000);
const signIns = Number(process.argv[3] ?? 16);
const dir = mkdtempSync(join(tmpdir(), "guard-overhead-"));
const database = await openDatabase(`sqlite:${join(dir, "data.sqlite")}`);
await migrateToLatest(database);
const services = createServices(database, new CryptoPool(2), {
  installationSecret: InstallationSecret.generate(),
});
const guard = services.signInGuard;
const password = "correct horse battery staple";
await services.domains.create("example.org");
await services.users.create({ email: "alice@example.org", password, mailCrypt: true });

const nothing = async () => ({ right: true, value: null });
const perAttempt = async (client: (i: number) => string): Promise<number> => {
  const started = performance.now();
  for (let i = 0; i < attempts; i++)
    await guard.attempt(
      { kind: "password", door: "passdb", account: "alice@example.org", client: { address: client(i) } },
      nothing,
    );
  return ((performance.now() - started) / attempts) * 1000;
};
// A client that signed in before (the honest path of every IMAP connection), then new clients.
await perAttempt(() => "192.0.2.1");
const trustedMicros = await perAttempt(() => "192.0.2.1");
const newClientMicros = await perAttempt((i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);

let started = performance.now();
for (let i = 0; i < signIns; i++) {
  const result = await services.signIn.signIn("alice@example.org", password, {
    door: "passdb",
    client: { address: "192.0.2.1" },
    unlockMailCrypt: true,
  });
  if (result.kind !== "ok") throw new Error(`sign-in ${result.kind}`);
}
const signInMicros = ((performance.now() - started) / signIns) * 1000;
started = performance.now();
await database.close();
rmSync(dir, { recursive: true, force: true });
process.stdout.write(
  `GUARD_JSON ${JSON.stringify({
    attempts,
    signIns,
    trustedMicros: Math.round(trustedMicros),
    newClientMicros: Math.round(newClientMicros),
    signInMicros: Math.round(signInMicros),
    trustedShare: trustedMicros / signInMicros,
  })}\n`,
);
