import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { md5Crypt } from "../../src/credentials/md5-crypt.ts";
import { shaCrypt } from "../../src/credentials/sha-crypt.ts";

describe("shaCrypt", () => {
  // Test vectors from Ulrich Drepper's "Unix crypt using SHA-256 and SHA-512" (also reproduced with
  // `openssl passwd -5/-6 -salt ...`).
  const cases: Array<[setting: string, password: string, expected: string]> = [
    ["$5$saltstring", "Hello world!", "$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5"],
    [
      "$5$rounds=10000$saltstringsaltstring",
      "Hello world!",
      "$5$rounds=10000$saltstringsaltst$3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA",
    ],
    [
      "$6$saltstring",
      "Hello world!",
      "$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1",
    ],
    [
      "$6$rounds=10000$saltstringsaltstring",
      "Hello world!",
      "$6$rounds=10000$saltstringsaltst$OW1/O6BYHV6BcXZu8QVeXbDWra3Oeqh0sbHbbMCVNSnCM/UrjmM0Dp8vOuZeHBy/YTBmSK6H9qs/y3RnOaw5v.",
    ],
    [
      "$6$rounds=10$roundstoolow",
      "the minimum number is still observed",
      "$6$rounds=1000$roundstoolow$kUMsbe306n21p9R.FRkW3IGn.S9NPN0x50YhH1xhLsPuWGsUSklZt58jaTfF4ZEQpyUNGc0dqbpBYYBaHHrsX.",
    ],
    [
      "$5$rounds=1000$s4ltS4lt",
      "pässwörd€",
      // openssl passwd -5 -salt 'rounds=1000$s4ltS4lt' 'pässwörd€'
      "$5$rounds=1000$s4ltS4lt$86eqnCV.w543BbgRO9r7RNomSeB70r1fJx0RLUEYrBA",
    ],
  ];
  for (const [setting, password, expected] of cases) {
    it(`${setting}`, () => {
      assert.equal(shaCrypt(password, setting), expected);
      // A full hash works as its own setting.
      assert.equal(shaCrypt(password, expected), expected);
    });
  }

  it("keeps the rounds= prefix only when it was given", () => {
    assert.ok(shaCrypt("x", "$6$rounds=5000$abc$")!.startsWith("$6$rounds=5000$abc$"));
    assert.ok(shaCrypt("x", "$6$abc$")!.startsWith("$6$abc$"));
    assert.equal(shaCrypt("x", "$6$rounds=5000$abc$")!.slice(-86), shaCrypt("x", "$6$abc$")!.slice(-86));
  });

  it("handles empty and long passwords and truncates the salt to 16 characters", () => {
    assert.match(shaCrypt("", "$6$abc")!, /^\$6\$abc\$[./0-9A-Za-z]{86}$/);
    assert.match(shaCrypt("p".repeat(200), "$5$abc")!, /^\$5\$abc\$[./0-9A-Za-z]{43}$/);
    assert.ok(shaCrypt("x", "$6$0123456789abcdefXYZ$")!.startsWith("$6$0123456789abcdef$"));
  });

  it("returns null for other formats", () => {
    assert.equal(shaCrypt("x", "$1$abc$"), null);
    assert.equal(shaCrypt("x", "garbage"), null);
  });
});

describe("md5Crypt", () => {
  it("matches glibc/openssl output", () => {
    // openssl passwd -1 -salt saltsalt 'correct horse battery' (also the reference vector)
    assert.equal(md5Crypt("correct horse battery", "$1$saltsalt$"), "$1$saltsalt$UevX3RQ4rPNbqFqf8dVFn.");
    // openssl passwd -1 -salt 'aB3.dE/9' 'pässwörd€'
    assert.equal(
      md5Crypt("pässwörd€", "$1$aB3.dE/9$8RauM7xpOUiLuZ.iA86de/"),
      "$1$aB3.dE/9$8RauM7xpOUiLuZ.iA86de/",
    );
    // openssl passwd -1 -salt 12345678901 '' : salt cut to 8 characters, empty password
    assert.equal(md5Crypt("", "$1$12345678901"), "$1$12345678$xek.CpjQUVgdf/P2N9KQf/");
  });

  it("returns null for other formats", () => {
    assert.equal(md5Crypt("x", "$6$abc$"), null);
  });
});
