/**
 * The physical limits of passdb on this machine, Argon2id derivations hashed in a loop by the same
 * library (sodium-native, async on libuv's pool) through the same bounded CryptoPool with the
 * service's default size, `concurrency` loops at once. Prints one JSON line. Modes:
 * - `pair`: what a MailCrypt sign-in cost before issue 30, the login hash checked (t=4) and then the
 *   secret box's key derived (t=2), both 64 MiB: the rate passdb is measured against.
 * - `one`: one derivation at t=2, 64 MiB, what a sign-in costs now: passdb's ceiling.
 * Usage: seconds concurrency password pair|one
 */
import { availableParallelism } from "node:os";
import { CryptoPool, ensureThreadPoolSize } from "../packages/service/src/credentials/crypto-pool.ts";
import { sodium } from "../packages/service/src/credentials/sodium.ts";
import { measureWindow } from "./window.ts";

const seconds = Number(process.argv[2]);
const concurrency = Number(process.argv[3]);
const password = Buffer.from(process.argv[4] ?? "", "utf8");
const mode = process.argv[5] === "one" ? "one" : "pair";
const poolSize = availableParallelism();
ensureThreadPoolSize(poolSize);
const pool = new CryptoPool(poolSize);

// The login hash as it was before issue 30 (Symfony's t=4), made here once.
const str = Buffer.alloc(sodium.crypto_pwhash_STRBYTES);
await sodium.crypto_pwhash_str_async(str, password, 4, 67108864);
const salt = Buffer.alloc(16, 7);

async function boxKey(): Promise<void> {
  const key = Buffer.alloc(32);
  await pool.run(() =>
    sodium.crypto_pwhash_async(key, password, salt, 2, 67108864, sodium.crypto_pwhash_ALG_ARGON2ID13),
  );
}

async function pair(): Promise<void> {
  const ok = await pool.run(() => sodium.crypto_pwhash_str_verify_async(str, password));
  if (!ok) throw new Error("the hash made here does not verify");
  await boxKey();
}

const window = await measureWindow(seconds, concurrency, mode === "one" ? boxKey : pair);
if (window.errors > 0) throw new Error(`${window.errors} sign-ins failed`);
const completed = window.answers.length;
process.stdout.write(
  `ARGON2_JSON ${JSON.stringify({ mode, poolSize, concurrency, seconds: window.seconds, completed, rps: completed / window.seconds })}\n`,
);
