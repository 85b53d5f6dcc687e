import assert from "node:assert/strict";
import { scryptSync } from "node:crypto";
import { describe, it } from "node:test";
import { findBackupCode, generateBackupCodes, hashBackupCode } from "../../src/credentials/backup-codes.ts";

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

  it("hashes with salted scrypt in the documented format", async () => {
    const hash = await hashBackupCode("123456");
    const match = /^\$scrypt\$N=16384,r=8,p=1\$([A-Za-z0-9+/]{22})\$([A-Za-z0-9+/]{43})$/.exec(hash);
    assert.ok(match, hash);
    // Independent recomputation with node:crypto's synchronous scrypt.
    const expected = scryptSync("123456", Buffer.from(match[1]!, "base64"), 32, { N: 16384, r: 8, p: 1 });
    assert.equal(Buffer.from(match[2]!, "base64").toString("hex"), expected.toString("hex"));
    assert.notEqual(await hashBackupCode("123456"), hash, "salted");
    await assert.rejects(hashBackupCode("12345"), RangeError);
    await assert.rejects(hashBackupCode("abcdef"), RangeError);
  });

  it("finds the index of the matching code, or -1", async () => {
    const codes = generateBackupCodes();
    const hashes = await Promise.all(codes.map((code) => hashBackupCode(code)));
    for (const [index, code] of codes.entries()) {
      assert.equal(await findBackupCode(code, hashes), index);
    }
    assert.equal(await findBackupCode(` ${codes[2]!.slice(0, 3)} ${codes[2]!.slice(3)} `, hashes), 2);
    let unused = "100000";
    while (codes.includes(unused)) unused = String(Number(unused) + 1);
    assert.equal(await findBackupCode(unused, hashes), -1);
    assert.equal(await findBackupCode(codes[0]!, []), -1);
  });

  it("rejects non-digit input and tolerates corrupt stored entries", async () => {
    const hashes = [await hashBackupCode("654321")];
    for (const bad of ["", "65432", "6543210", "65432a", "654321\n1", "٦٥٤٣٢١"]) {
      assert.equal(await findBackupCode(bad, hashes), -1, bad);
    }
    const corrupt = [
      "654321",
      "$scrypt$N=16384,r=8,p=1$$",
      "$scrypt$N=3,r=8,p=1$AAAA$AAAA",
      "$scrypt$N=1073741824,r=8,p=1$AAAA$AAAA",
      ...hashes,
    ];
    assert.equal(await findBackupCode("654321", corrupt), 4);
  });
});
