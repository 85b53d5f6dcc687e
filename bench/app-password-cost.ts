/**
 * Where an app-password passdb sign-in's time goes (issue 29), beside the sign-in guard's share: on
 * a SQLite file through the service's own migrations, one MailCrypt user with a mail app password
 * made through AppPasswordService, then one after the other in one process, the wall time per
 *   - whole sign-in: `SignInService.signIn` as passdb calls it (door passdb, a client address that
 *     signed in before, the private key unlocked), and the statements it runs;
 *   - guard: `SignInGuard.attemptCheap` (the app passwords' path) with a check that does nothing, for the same client;
 *   - match: `AppPasswordService.match` alone (the keyed hash, one read, the HKDF secret box).
 * Prints one JSON line.
 *
 *   node bench/app-password-cost.ts [attempts=2000]
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
const dir = mkdtempSync(join(tmpdir(), "app-password-cost-"));
let statements: string[] | null = null;
const database = await openDatabase(`sqlite:${join(dir, "data.sqlite")}`, {
  log: (event) => {
    if (event.level === "query" && statements) statements.push(event.query.sql);
  },
});
await migrateToLatest(database);
const services = createServices(database, new CryptoPool(2), {
  installationSecret: InstallationSecret.generate(),
});
const email = "alice@example.org";
const password = "correct horse battery staple";
const client = { address: "192.0.2.1" };
await services.domains.create("example.org");
await services.users.create({ email, password, mailCrypt: true });
const user = await services.users.findByEmail(email);
if (!user) throw new Error("no user");
const proof = await services.signIn.confirmPassword(user, password);
const { password: appPassword } = await services.appPasswords.createForOwner(
  proof,
  { name: "Phone", scope: "mail" },
  { door: "console", clientAddress: null, actor: "bench" },
);

const signIn = async () => {
  const result = await services.signIn.signIn(email, appPassword, {
    door: "passdb",
    client,
    unlockMailCrypt: true,
  });
  if (result.kind !== "ok" || result.mailCrypt.state !== "unlocked")
    throw new Error(`sign-in ${result.kind}`);
};
const microsPer = async (work: () => Promise<unknown>): Promise<number> => {
  const started = performance.now();
  // Each attempt in an event-loop turn of its own, as requests arrive: the keyed reads' snapshot
  // (db/key-reads.ts) ends with the turn.
  for (let i = 0; i < attempts; i++) {
    await work();
    await new Promise(setImmediate);
  }
  return ((performance.now() - started) / attempts) * 1000;
};

// The first sign-in trusts the client and writes "last used"; the honest path is every one after.
await microsPer(signIn);
statements = [];
await signIn();
const perSignIn = statements;
statements = null;
const signInMicros = await microsPer(signIn);
const guardMicros = await microsPer(() =>
  services.signInGuard.attemptCheap(
    { kind: "app_password", door: "passdb", account: email, client },
    async () => ({
      right: true,
      value: null,
    }),
  ),
);
const matchMicros = await microsPer(() =>
  services.appPasswords.match(user.id, appPassword, "passdb", "192.0.2.1"),
);
await database.close();
rmSync(dir, { recursive: true, force: true });
process.stdout.write(
  `APP_PASSWORD_COST_JSON ${JSON.stringify({
    attempts,
    signInMicros: Math.round(signInMicros),
    guardMicros: Math.round(guardMicros),
    matchMicros: Math.round(matchMicros),
    statementsPerSignIn: perSignIn.length,
    writesPerSignIn: perSignIn.filter((sql) => /^\s*(update|insert|delete)/i.test(sql)).length,
    statements: perSignIn.map((sql) => sql.slice(0, 60)),
  })}\n`,
);
