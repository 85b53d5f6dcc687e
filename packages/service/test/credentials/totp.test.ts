import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  base32Decode,
  base32Encode,
  currentTotpCode,
  generateTotpSecret,
  totpStepFor,
} from "../../src/credentials/totp.ts";

// RFC 6238 appendix B: the SHA-1 seed is the ASCII string "12345678901234567890"; 8-digit values
// truncated to our 6 digits are their last 6 digits.
const RFC_SECRET = base32Encode(Buffer.from("12345678901234567890", "ascii"));
const RFC_VECTORS: Array<[seconds: number, code: string]> = [
  [59, "287082"],
  [1111111109, "081804"],
  [1111111111, "050471"],
  [1234567890, "005924"],
  [2000000000, "279037"],
  [20000000000, "353130"],
];

describe("TOTP", () => {
  it("base32 of the RFC seed is the well-known value", () => {
    assert.equal(RFC_SECRET, "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
    assert.equal(
      base32Decode("gezdgnbvgy3tqojq gezdgnbvgy3tqojq====")?.toString("ascii"),
      "12345678901234567890",
    );
    assert.equal(base32Decode("GEZ1"), null);
  });

  for (const [seconds, code] of RFC_VECTORS) {
    it(`RFC 6238 SHA-1 vector at T=${seconds}`, () => {
      const now = seconds * 1000;
      assert.equal(currentTotpCode(RFC_SECRET, now), code);
      assert.equal(totpStepFor(RFC_SECRET, code, now, null), Math.floor(seconds / 30));
    });
  }

  it("accepts one step either side, refuses two", () => {
    const now = 59_000; // step 1, code 287082
    assert.equal(totpStepFor(RFC_SECRET, "287082", now + 30_000, null), 1);
    assert.equal(totpStepFor(RFC_SECRET, "287082", now - 30_000, null), 1);
    assert.equal(totpStepFor(RFC_SECRET, "287082", now + 60_000, null), null);
    const later = 1111111109_000;
    const code = currentTotpCode(RFC_SECRET, later);
    assert.equal(totpStepFor(RFC_SECRET, code, later - 60_000, null), null);
    assert.equal(totpStepFor(RFC_SECRET, code, later + 60_000, null), null);
    assert.equal(totpStepFor(RFC_SECRET, code, later + 30_000, null), Math.floor(later / 30_000));
  });

  it("refuses a replayed code and codes of earlier steps", () => {
    const now = 1234567890_000;
    const step = Math.floor(now / 30_000);
    const code = currentTotpCode(RFC_SECRET, now);
    assert.equal(totpStepFor(RFC_SECRET, code, now, step - 1), step);
    assert.equal(totpStepFor(RFC_SECRET, code, now, step), null);
    assert.equal(totpStepFor(RFC_SECRET, code, now, step + 1), null);
    // The previous step's code is still in the window but was superseded by a later use.
    const previous = currentTotpCode(RFC_SECRET, now - 30_000);
    assert.equal(totpStepFor(RFC_SECRET, previous, now, null), step - 1);
    assert.equal(totpStepFor(RFC_SECRET, previous, now, step), null);
  });

  it("strips spaces and refuses anything but 6 digits", () => {
    assert.equal(totpStepFor(RFC_SECRET, " 287 082 ", 59_000, null), 1);
    for (const bad of ["", "28708", "2870822", "94287082", "28708a", "287082\u0660", "-28708"]) {
      assert.equal(totpStepFor(RFC_SECRET, bad, 59_000, null), null, bad);
    }
    assert.equal(totpStepFor(RFC_SECRET, "287083", 59_000, null), null);
    assert.equal(totpStepFor("not base32!", "287082", 59_000, null), null);
  });

  it("generates 52-character unpadded upper-case base32 secrets of 32 bytes that work", () => {
    const secret = generateTotpSecret();
    assert.match(secret, /^[A-Z2-7]{52}$/);
    assert.equal(base32Decode(secret)?.length, 32);
    assert.notEqual(generateTotpSecret(), secret);
    const now = Date.now();
    assert.equal(totpStepFor(secret, currentTotpCode(secret, now), now, null), Math.floor(now / 30_000));
  });
});
