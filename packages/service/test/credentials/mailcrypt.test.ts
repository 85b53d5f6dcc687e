import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createPrivateKey } from "node:crypto";
import { describe, it } from "node:test";
import { CryptoPool } from "../../src/credentials/crypto-pool.ts";
import {
  generateMailCryptKeyPair,
  newRecoveryToken,
  normalizeRecoveryToken,
  openSecretBox,
  publicKeyMatchesPrivateKey,
  SecretBoxError,
  sealSecretBox,
} from "../../src/credentials/mailcrypt.ts";
// A verbatim copy of the shared reference/vectors.json, so the suite runs from any checkout.
import vectors from "./vectors.json" with { type: "json" };

const pool = new CryptoPool(2);
const fromB64 = (text: string) => Buffer.from(text, "base64").toString("utf8");

function openssl(args: string[], input: string): string {
  const result = spawnSync("openssl", args, { input, encoding: "utf8" });
  assert.equal(result.status, 0, `openssl ${args.join(" ")}: ${result.stderr}`);
  return result.stdout;
}

/** The stored private-key form: base64 of an unencrypted PKCS#8 PEM of a P-521 key. */
function assertStoredP521PrivateKey(stored: string): string {
  assert.match(stored, /^[A-Za-z0-9+/]+={0,2}$/);
  const pem = fromB64(stored);
  assert.match(
    pem,
    /^-----BEGIN PRIVATE KEY-----\n(?:[A-Za-z0-9+/=]{64}\n)*[A-Za-z0-9+/=]{1,64}\n-----END PRIVATE KEY-----\n$/,
  );
  const key = createPrivateKey(pem);
  assert.equal(key.asymmetricKeyType, "ec");
  assert.equal(key.asymmetricKeyDetails?.namedCurve, "secp521r1");
  return pem;
}

describe("secret box", () => {
  it("opens the reference box with its secret; the plaintext is a base64 P-521 PKCS#8 PEM", async () => {
    const plaintext = await openSecretBox(vectors.secretBox.box, vectors.secretBox.secret, pool);
    assert.equal(Buffer.from(vectors.secretBox.box, "base64").length, 568);
    assert.equal(plaintext.length, 512);
    const pem = assertStoredP521PrivateKey(plaintext);
    assert.equal(pem.length, 384);
    assert.ok(Buffer.from(pem.split("\n")[1]!, "base64").toString("base64").startsWith("MIHuAgEA"));
  });

  it("refuses a wrong secret with SecretBoxError", async () => {
    await assert.rejects(
      openSecretBox(vectors.secretBox.box, "bbde593d-8a9e-4d0e-a3ab-9fdd9f5c3238", pool),
      (error: unknown) =>
        error instanceof SecretBoxError && error.message === "decryption of mailCryptSecretBox failed",
    );
  });

  it("refuses a tampered box", async () => {
    const raw = Buffer.from(vectors.secretBox.box, "base64");
    raw[raw.length - 1]! ^= 1;
    await assert.rejects(
      openSecretBox(raw.toString("base64"), vectors.secretBox.secret, pool),
      SecretBoxError,
    );
  });

  it("reports bad base64 and truncation with the reference's messages", async () => {
    const expectError = (message: string) => (error: unknown) =>
      error instanceof SecretBoxError && error.message === message;
    for (const bad of [
      "not base64!",
      `${vectors.secretBox.box.slice(0, 40)}*${vectors.secretBox.box.slice(41)}`,
      "QQ=Q",
      "A",
    ]) {
      await assert.rejects(
        openSecretBox(bad, "x", pool),
        expectError("Base64 decoding of encrypted message failed"),
      );
    }
    const short = Buffer.alloc(16 + 24 + 15).toString("base64");
    await assert.rejects(openSecretBox(short, "x", pool), expectError("The encrypted message was truncated"));
    await assert.rejects(openSecretBox("", "x", pool), expectError("The encrypted message was truncated"));
  });

  it("seal -> open round-trip, with fresh salt and nonce each time", async () => {
    const secret = "pässwörd€ of the user";
    const message = "secret message ✓";
    const box = await sealSecretBox(message, secret, pool);
    assert.equal(Buffer.from(box, "base64").length, 16 + 24 + 16 + Buffer.byteLength(message));
    assert.equal(await openSecretBox(box, secret, pool), message);
    assert.notEqual(await sealSecretBox(message, secret, pool), box);
    await assert.rejects(openSecretBox(box, "pässwörd€ of the usr", pool), SecretBoxError);
  });

  it("an empty plaintext round-trips (the box is exactly salt, nonce and MAC)", async () => {
    const box = await sealSecretBox("", "s", pool);
    assert.equal(Buffer.from(box, "base64").length, 56);
    assert.equal(await openSecretBox(box, "s", pool), "");
  });
});

describe("MailCrypt key pairs", () => {
  it("the reference key pair matches itself, and not a different key", async () => {
    const { publicKey, privateKey } = vectors.mailCryptKeyPair;
    assertStoredP521PrivateKey(privateKey);
    assert.equal(publicKeyMatchesPrivateKey(publicKey, privateKey), true);
    const other = await generateMailCryptKeyPair();
    assert.equal(publicKeyMatchesPrivateKey(other.publicKey, privateKey), false);
    assert.equal(publicKeyMatchesPrivateKey(publicKey, other.privateKey), false);
    assert.equal(publicKeyMatchesPrivateKey("garbage", privateKey), false);
  });

  it("generates a pair that openssl accepts, with the public key derived from the private one", async () => {
    const pair = await generateMailCryptKeyPair();
    const privatePem = assertStoredP521PrivateKey(pair.privateKey);
    const publicPem = fromB64(pair.publicKey);
    assert.match(publicPem, /^-----BEGIN PUBLIC KEY-----\n[\s\S]+\n-----END PUBLIC KEY-----\n$/);
    // openssl pkey re-emits an unencrypted PKCS#8 PEM: the reference pipes its key through exactly this.
    assert.equal(openssl(["pkey"], privatePem), privatePem);
    assert.match(openssl(["pkey", "-noout", "-text"], privatePem), /ASN1 OID: secp521r1/);
    assert.equal(openssl(["pkey", "-pubout"], privatePem), publicPem);
    assert.equal(publicKeyMatchesPrivateKey(pair.publicKey, pair.privateKey), true);
    // Same shape as the reference's stored public key (SPKI, uncompressed point).
    assert.equal(pair.publicKey.length, vectors.mailCryptKeyPair.publicKey.length);
  });

  it("a generated private key survives a secret box round-trip", async () => {
    const pair = await generateMailCryptKeyPair();
    const token = newRecoveryToken();
    const box = await sealSecretBox(pair.privateKey, token, pool);
    assert.equal(await openSecretBox(box, token, pool), pair.privateKey);
  });
});

describe("recovery tokens", () => {
  it("are lower-case UUID v4", () => {
    const token = newRecoveryToken();
    assert.match(token, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.notEqual(newRecoveryToken(), token);
  });

  it("normalizeRecoveryToken lower-cases valid UUIDs and rejects the rest", () => {
    assert.equal(normalizeRecoveryToken("BBDE593D-8A9E-4D0E-A3AB-9FDD9F5C3237"), vectors.secretBox.secret);
    assert.equal(normalizeRecoveryToken(` ${vectors.secretBox.secret}\n`), vectors.secretBox.secret);
    for (const bad of [
      "",
      "bbde593d8a9e4d0ea3ab9fdd9f5c3237",
      "bbde593d-8a9e-4d0e-a3ab-9fdd9f5c323",
      "bbde593d-8a9e-4d0e-a3ab-9fdd9f5c3237a",
      "gbde593d-8a9e-4d0e-a3ab-9fdd9f5c3237",
      "{bbde593d-8a9e-4d0e-a3ab-9fdd9f5c3237}",
      "00000000-0000-0000-0000-000000000000",
    ]) {
      assert.equal(normalizeRecoveryToken(bad), null, bad);
    }
  });
});
