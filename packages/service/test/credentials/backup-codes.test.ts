import assert from "node:assert/strict";
import { randomBytes, scryptSync } from "node:crypto";
import { performance } from "node:perf_hooks";
import { describe, it } from "node:test";
import { InstallationSecret } from "../../src/config.ts";
import {
  type BackupCodeKey,
  findBackupCode,
  generateBackupCodes,
  hashBackupCode,
  hashBackupCodeWithScrypt,
} from "../../src/credentials/backup-codes.ts";

const secret = new InstallationSecret(Buffer.from("5e".repeat(32), "hex"));
const alice: BackupCodeKey = { secret, email: "alice@example.org" };

describe("backup codes", () => {
  it("generates distinct 6-digit codes in 100000-999999", () => {
    for (let round = 0; round < 50; round++) {
      const codes = generateBackupCodes();
      assert.equal(codes.length, 6);
      assert.equal(new Set(codes).size, 6);
      for (const code of codes) {
        assert.match(code, /^[1-9]\d{5}$/);
      }
    }
    assert.equal(generateBackupCodes(10).length, 10);
  });

  it("stores HMAC-SHA256(secret, 'backup-code' NUL address NUL code): a known answer", () => {
    // openssl dgst -sha256 -mac HMAC -macopt hexkey:5e5e...5e of "backup-code\0alice@example.org\0123456"
    assert.equal(
      hashBackupCode("123456", alice),
      "$hmac-sha256$Mzsz+lghiSlr4nNbXbpXsdIC6Uy1xp6fzXA4ucDmz9c=",
    );
    assert.equal(hashBackupCode(" 123 456 ", alice), hashBackupCode("123456", alice), "blanks ignored");
    assert.notEqual(
      hashBackupCode("123456", { secret, email: "bob@example.org" }),
      hashBackupCode("123456", alice),
      "equal codes of two users differ",
    );
    assert.throws(() => hashBackupCode("12345", alice), RangeError);
    assert.throws(() => hashBackupCode("abcdef", alice), RangeError);
  });

  it("finds the index of the matching code, or -1", async () => {
    const codes = generateBackupCodes();
    const hashes = codes.map((code) => hashBackupCode(code, alice));
    for (const [index, code] of codes.entries()) {
      assert.equal(await findBackupCode(code, hashes, alice), index);
    }
    assert.equal(await findBackupCode(` ${codes[2]!.slice(0, 3)} ${codes[2]!.slice(3)} `, hashes, alice), 2);
    let unused = "100000";
    while (codes.includes(unused)) unused = String(Number(unused) + 1);
    assert.equal(await findBackupCode(unused, hashes, alice), -1);
    assert.equal(await findBackupCode(codes[0]!, [], alice), -1);
  });

  it("another installation's secret, or another user, does not match", async () => {
    const hashes = ["111111", "222222"].map((code) => hashBackupCode(code, alice));
    const elsewhere = { secret: InstallationSecret.generate(), email: alice.email };
    assert.equal(await findBackupCode("222222", hashes, elsewhere), -1);
    assert.equal(await findBackupCode("222222", hashes, { secret, email: "bob@example.org" }), -1);
    assert.equal(await findBackupCode("222222", hashes, alice), 1);
  });

  it("legacy scrypt codes are still accepted", async () => {
    const salt = randomBytes(16);
    // Made independently with node:crypto's synchronous scrypt, in the stored format.
    const hash = scryptSync("654321", salt, 32, { N: 16384, r: 8, p: 1 });
    const unpadded = (b: Buffer) => b.toString("base64").replace(/=+$/, "");
    const stored = `$scrypt$N=16384,r=8,p=1$${unpadded(salt)}$${unpadded(hash)}`;
    assert.equal(await hashBackupCodeWithScrypt("654321", salt), stored);
    const legacy = [await hashBackupCodeWithScrypt("111111", randomBytes(16)), stored];
    assert.equal(await findBackupCode("654321", legacy, alice), 1);
    assert.equal(await findBackupCode("111111", legacy, alice), 0);
    assert.equal(await findBackupCode("999999", legacy, alice), -1);
  });

  it("a wrong code costs one HMAC, not a slow hash per stored code", async () => {
    const keyed = generateBackupCodes().map((code) => hashBackupCode(code, alice));
    const legacy = await Promise.all(
      generateBackupCodes().map((code) => hashBackupCodeWithScrypt(code, randomBytes(16))),
    );
    const wrong = "100000";
    let start = performance.now();
    assert.equal(await findBackupCode(wrong, legacy, alice), -1);
    const oneLegacyCheck = performance.now() - start;
    start = performance.now();
    for (let i = 0; i < 200; i++) assert.equal(await findBackupCode(wrong, keyed, alice), -1);
    const twoHundredKeyedChecks = performance.now() - start;
    // Six scrypt hashes (16 MiB each) take tens of milliseconds; 200 HMACs a few.
    assert.ok(
      twoHundredKeyedChecks < oneLegacyCheck,
      `200 keyed checks took ${twoHundredKeyedChecks.toFixed(1)} ms, one legacy check ${oneLegacyCheck.toFixed(1)} ms`,
    );
  });

  it("rejects non-digit input and tolerates corrupt stored entries", async () => {
    const hashes = [hashBackupCode("654321", alice)];
    for (const bad of ["", "65432", "6543210", "65432a", "654321\n1", "٦٥٤٣٢١"]) {
      assert.equal(await findBackupCode(bad, hashes, alice), -1, bad);
    }
    const corrupt = [
      "654321",
      "$hmac-sha256$",
      "$hmac-sha256$AAAA",
      `${hashes[0]}=`,
      "$scrypt$N=16384,r=8,p=1$$",
      "$scrypt$N=3,r=8,p=1$AAAA$AAAA",
      "$scrypt$N=1073741824,r=8,p=1$AAAA$AAAA",
      ...hashes,
    ];
    assert.equal(await findBackupCode("654321", corrupt, alice), 7);
  });
});
