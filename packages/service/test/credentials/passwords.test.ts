import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CryptoPool } from "../../src/credentials/crypto-pool.ts";
import {
  hashPassword,
  PasswordPolicyError,
  verifyDummy,
  verifyPassword,
} from "../../src/credentials/passwords.ts";
import { shaCrypt } from "../../src/credentials/sha-crypt.ts";
import { sodium } from "../../src/credentials/sodium.ts";
// A verbatim copy of the shared reference/vectors.json, so the suite runs from any checkout.
import vectors from "./vectors.json" with { type: "json" };

const pool = new CryptoPool(2);
const { password, ...hashes } = vectors.passwordHashes;

// Made with OpenSSL 3.0 during development:
//   openssl passwd -6 -salt 'Xq9.zR/4kLmN2pQw' 'pässwörd€'
//   openssl passwd -5 -salt 'Xq9.zR/4kLmN2pQw' 'pässwörd€'
//   openssl passwd -1 -salt 'aB3.dE/9' 'pässwörd€'
//   openssl passwd -6 -salt 'rounds=1000$s4ltS4lt' 'pässwörd€'
//   openssl passwd -5 -salt 'rounds=10000$s4ltS4lt' 'pässwörd€'
const NON_ASCII = "pässwörd€";
const OPENSSL = {
  sha512:
    "$6$Xq9.zR/4kLmN2pQw$Oq92YKKypL0txJDJeta1AwjlDPpy4.7atVqlR083SXEZ.VO1DQ7/L1lIgxkV687pdAQyxV6DrEPBxdbT1tHPe1",
  sha256: "$5$Xq9.zR/4kLmN2pQw$JsOLyFMP7LRnXWVWZdY/EKEme1ucrQ3.s.VyM.HrYp8",
  md5: "$1$aB3.dE/9$8RauM7xpOUiLuZ.iA86de/",
  sha512Rounds1000:
    "$6$rounds=1000$s4ltS4lt$TY.lsOlO74SJfxxjaUfnvBNuAIzE0Qup.l/eA.LaNwYKhtV9nImsvzmkw7ul70BXqvEHlruP1KflOCMZhUJUu/",
  sha256Rounds10000: "$5$rounds=10000$s4ltS4lt$/ThHfvRxNUn/oKgWX7hlTdM2YV7Q9l0tT.V0NlkawY7",
};

// Made with Python's crypt module (libxcrypt) during development:
//   crypt.crypt("pässwörd€", "$2b$05$0123456789ABCDEFGHIJKL")
//   crypt.crypt(base64(sha512(LONG)), "$2y$05$abcdefghijklmnopqrstuu")  (Symfony's pre-hash for > 72 bytes)
const BCRYPT_NON_ASCII = "$2b$05$0123456789ABCDEFGHIJK.ZXBWTFeYcnvE9qtoTHvKNiKKMbo.POS";
const LONG = "Ä".repeat(40) + " and then some more text";
const BCRYPT_LONG = "$2y$05$abcdefghijklmnopqrstuucvl4ijt5xsCb1mQgnXHUctV1nBF1toi";

const NEW_PREFIX = "$argon2id$v=19$m=65536,t=2,p=1$";

describe("verifyPassword: reference vectors", () => {
  for (const [name, hash] of Object.entries(hashes)) {
    it(`${name} verifies the right password and refuses a wrong one`, async () => {
      const right = await verifyPassword(password, hash, pool);
      assert.equal(right.valid, true);
      // userli's Argon2id is t=4: verified as it is, brought to t=2 at the first sign-in.
      assert.equal(right.needsRehash, true);
      assert.deepEqual(await verifyPassword(`${password}!`, hash, pool), {
        valid: false,
        needsRehash: false,
      });
      assert.equal((await verifyPassword("correct horse batterY", hash, pool)).valid, false);
    });
  }
});

describe("verifyPassword: crypt formats from other tools", () => {
  for (const [name, hash] of Object.entries(OPENSSL)) {
    it(`openssl ${name} with a non-ASCII password`, async () => {
      assert.deepEqual(await verifyPassword(NON_ASCII, hash, pool), { valid: true, needsRehash: true });
      assert.equal((await verifyPassword("passwörd€", hash, pool)).valid, false);
      // The same characters in Latin-1 bytes must not match: the password is hashed as UTF-8.
      assert.equal(
        (await verifyPassword(Buffer.from(NON_ASCII, "utf8").toString("latin1"), hash, pool)).valid,
        false,
      );
    });
  }

  it("bcrypt $2b$ from libxcrypt with a non-ASCII password", async () => {
    assert.deepEqual(await verifyPassword(NON_ASCII, BCRYPT_NON_ASCII, pool), {
      valid: true,
      needsRehash: true,
    });
    assert.equal((await verifyPassword("pässwörd", BCRYPT_NON_ASCII, pool)).valid, false);
  });

  it("bcrypt with a password over 72 bytes uses the SHA-512 pre-hash", async () => {
    assert.ok(Buffer.byteLength(LONG) > 72);
    assert.equal((await verifyPassword(LONG, BCRYPT_LONG, pool)).valid, true);
    // Plain bcrypt would ignore everything after byte 72; the pre-hash makes the tail count.
    assert.equal((await verifyPassword(LONG.replace("text", "TEXT"), BCRYPT_LONG, pool)).valid, false);
  });

  it("legacy crypt runs off the event loop", async () => {
    const hash = shaCrypt(NON_ASCII, "$6$rounds=50000$offloop")!;
    let turns = 0;
    let done = false;
    const spin = () => {
      if (done) return;
      turns++;
      setImmediate(spin);
    };
    setImmediate(spin);
    const check = await verifyPassword(NON_ASCII, hash, pool);
    done = true;
    assert.equal(check.valid, true);
    // Computed on the main thread, the check would finish before the event loop turned even once.
    assert.ok(turns > 0);
  });

  it("a tampered hash of the right password is refused", async () => {
    const hash = OPENSSL.sha512;
    const tampered = hash.slice(0, -1) + (hash.endsWith("1") ? "2" : "1");
    assert.equal((await verifyPassword(NON_ASCII, tampered, pool)).valid, false);
    // A clamped rounds value does not echo back, so crypt() output differs from the stored string.
    assert.equal((await verifyPassword(NON_ASCII, hash.replace("$6$", "$6$rounds=10$"), pool)).valid, false);
  });
});

describe("hashPassword", () => {
  it("writes Argon2id with m=65536,t=2,p=1 (the box key's cost) that verifies without rehash", async () => {
    const hash = await hashPassword(NON_ASCII, pool);
    assert.ok(hash.startsWith(NEW_PREFIX), hash);
    assert.match(hash, /^\$argon2id\$v=19\$m=65536,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    assert.deepEqual(await verifyPassword(NON_ASCII, hash, pool), { valid: true, needsRehash: false });
    assert.equal((await verifyPassword("pässwörd", hash, pool)).valid, false);
    assert.notEqual(await hashPassword(NON_ASCII, pool), hash, "salted");
  });

  it("refuses empty and over-long passwords", async () => {
    await assert.rejects(hashPassword("", pool), PasswordPolicyError);
    await assert.rejects(hashPassword("a".repeat(4097), pool), PasswordPolicyError);
    // 4096 bytes are fine; the limit counts UTF-8 bytes, not characters.
    assert.ok((await hashPassword("a".repeat(4096), pool)).startsWith(NEW_PREFIX));
    await assert.rejects(hashPassword("€".repeat(1366), pool), PasswordPolicyError);
  });
});

describe("verifyPassword: edge cases", () => {
  it("empty and 4097-byte passwords are invalid, never an error", async () => {
    const hash = await hashPassword("a".repeat(4096), pool);
    assert.equal((await verifyPassword("a".repeat(4096), hash, pool)).valid, true);
    assert.deepEqual(await verifyPassword("a".repeat(4097), hash, pool), {
      valid: false,
      needsRehash: false,
    });
    assert.deepEqual(await verifyPassword("", hash, pool), { valid: false, needsRehash: false });
    assert.deepEqual(await verifyPassword("", OPENSSL.sha512, pool), { valid: false, needsRehash: false });
  });

  it("unknown or garbage hashes are invalid", async () => {
    for (const hash of [
      "",
      "plain",
      password,
      "$argon2id$",
      "$argon2id$v=19$m=65536,t=4,p=1$c29tZXNhbHQ$",
      `$argon2id$v=19$m=65536,t=4,p=1$${"A".repeat(200)}`,
      "$2y$10$short",
      "$2x$10$OqCTM5oTcdM2vuhWmjf/JOp7124Rjv5E4FTJ9hZ.r9aekxzd9ApiW",
      "$7$whatever",
      "{SHA512-CRYPT}$6$abcdefgh$x",
      "aaMVVv1TqrkbQ", // DES crypt: not supported
    ]) {
      assert.deepEqual(
        await verifyPassword(password, hash, pool),
        { valid: false, needsRehash: false },
        hash,
      );
    }
  });

  it("Argon2 hashes with other parameters verify and ask for a rehash", async () => {
    // Real Argon2i and Argon2id hashes with smaller parameters, encoded the way libsodium does.
    for (const [alg, name] of [
      [1, "argon2i"],
      [sodium.crypto_pwhash_ALG_ARGON2ID13, "argon2id"],
    ] as const) {
      const salt = Buffer.alloc(16, 7);
      const out = Buffer.alloc(32);
      await sodium.crypto_pwhash_async(out, Buffer.from(NON_ASCII), salt, 3, 8 * 1024 * 1024, alg);
      const b64 = (b: Buffer) => b.toString("base64").replace(/=+$/, "");
      const hash = `$${name}$v=19$m=8192,t=3,p=1$${b64(salt)}$${b64(out)}`;
      assert.deepEqual(await verifyPassword(NON_ASCII, hash, pool), { valid: true, needsRehash: true }, hash);
      assert.equal((await verifyPassword("x", hash, pool)).valid, false);
    }
  });
});

describe("verifyDummy", () => {
  it("verifyDummy is always false", async () => {
    assert.equal(await verifyDummy(password, pool), false);
    assert.equal(await verifyDummy("", pool), false);
    assert.equal(await verifyDummy("a".repeat(5000), pool), false);
  });

  it("verifyDummy goes through the pool like a real check", async () => {
    const tiny = new CryptoPool(1);
    const pending = verifyDummy(password, tiny);
    assert.equal(tiny.running, 1);
    assert.equal(await pending, false);
    assert.equal(tiny.running, 0);
  });
});
