/**
 * The physical limit of passdb on this machine: the two Argon2id derivations of a MailCrypt
 * sign-in (the login hash check, t=4, and the secret box key, t=2, both 64 MiB), hashed in a loop
 * by the same library (sodium-native, async on libuv's pool) through the same bounded CryptoPool
 * with the service's default size, `concurrency` loops at once. Prints one JSON line.
 * Usage: seconds concurrency passwordHash password
 */
import { availableParallelism } from "node:os";
import { CryptoPool, ensureThreadPoolSize } from "../packages/service/src/credentials/crypto-pool.ts";
import { sodium } from "../packages/service/src/credentials/sodium.ts";
import { measureWindow } from "./window.ts";

const seconds = Number(process.argv[2]);
const concurrency = Number(process.argv[3]);
const hash = process.argv[4] ?? "";
const password = Buffer.from(process.argv[5] ?? "", "utf8");
const poolSize = availableParallelism();
ensureThreadPoolSize(poolSize);
const pool = new CryptoPool(poolSize);

const str = Buffer.alloc(sodium.crypto_pwhash_STRBYTES);
Buffer.from(hash, "utf8").copy(str);
const salt = Buffer.alloc(16, 7);

async function signIn(): Promise<void> {
  const ok = await pool.run(() => sodium.crypto_pwhash_str_verify_async(str, password));
  if (!ok) throw new Error("the precomputed hash does not verify");
  const key = Buffer.alloc(32);
  await pool.run(() =>
    sodium.crypto_pwhash_async(key, password, salt, 2, 67108864, sodium.crypto_pwhash_ALG_ARGON2ID13),
  );
}

const window = await measureWindow(seconds, concurrency, signIn);
if (window.errors > 0) throw new Error(`${window.errors} sign-ins failed`);
const completed = window.answers.length;
process.stdout.write(
  `ARGON2_JSON ${JSON.stringify({ poolSize, concurrency, seconds: window.seconds, completed, rps: completed / window.seconds })}\n`,
);
