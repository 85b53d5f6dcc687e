import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { checkAddress } from "../src/address-syntax.ts";
import { addressPlaceholders, parseAddress, parsePurgeAddress, renderCommand } from "../src/shell.ts";

interface AddressCase {
  address: string;
  new: string | null;
  known: string | null;
  why: string;
}

/** The cases both the service and the janitor run (the service's test reads this file too). */
export const addressCases: AddressCase[] = JSON.parse(
  readFileSync(new URL("./address-cases.json", import.meta.url), "utf8"),
);

describe("one address rule with the service", () => {
  test("the janitor's copy of the rule is the service's, byte for byte", () => {
    const janitor = readFileSync(new URL("../src/address-syntax.ts", import.meta.url), "utf8");
    const service = readFileSync(
      new URL("../../service/src/accounts/address-syntax.ts", import.meta.url),
      "utf8",
    );
    assert.equal(janitor, service);
  });

  test("every shared case: new and known verdicts and stored forms", () => {
    for (const c of addressCases) {
      const asNew = checkAddress(c.address, "new");
      const asKnown = checkAddress(c.address, "known");
      assert.equal(
        asNew.ok ? asNew.address.email : null,
        c.new,
        `new ${JSON.stringify(c.address)}: ${c.why}`,
      );
      assert.equal(
        asKnown.ok ? asKnown.address.email : null,
        c.known,
        `known ${JSON.stringify(c.address)}: ${c.why}`,
      );
      // Whatever the service creates, the janitor accepts, in the same stored form.
      if (c.new !== null) assert.equal(c.known, c.new, c.address);
      const janitor = parseAddress(c.address);
      assert.equal(janitor.ok ? janitor.address.key : null, c.known, `janitor ${JSON.stringify(c.address)}`);
      // A purge takes the known addresses without a wildcard of doveadm or the shell (written out here).
      const purge = parsePurgeAddress(c.address);
      const expected = c.known !== null && !/[*?%[\]]/.test(c.known) ? c.known : null;
      assert.equal(purge.ok ? purge.address.key : null, expected, `purge ${JSON.stringify(c.address)}`);
    }
  });

  test("an address holding a wildcard is refused for purges, with the character named", () => {
    for (const [email, wildcard] of [
      ["*@example.org", "*"],
      ["a?b@example.org", "?"],
      ["dave%@example.org", "%"],
      ["star*@example.org", "*"],
      ["jürgen?@bücher.example", "?"],
    ]) {
      assert.ok(parseAddress(email).ok, `${email} is a known address`);
      const check = parsePurgeAddress(email);
      assert.equal(check.ok, false, email);
      if (!check.ok)
        assert.equal(check.reason, `address holds ${wildcard}, which a purge tool reads as a wildcard`);
    }
    for (const email of ["a[1]@example.org", "a]@example.org"])
      assert.equal(parsePurgeAddress(email).ok, false);
    // symbols that are no pattern to doveadm or to a shell given a quoted word stay accepted
    for (const email of ["o'brien@example.org", "a$b&c|d!e^g{h}i~j@example.org", "x+tag=1@example.org"])
      assert.ok(parsePurgeAddress(email).ok, email);
  });

  test("every address the janitor accepts reaches the purge command as exactly itself", () => {
    const accepted = addressCases.filter((c) => c.known !== null).map((c) => c.known as string);
    for (const email of accepted) {
      const check = parsePurgeAddress(email);
      if (!check.ok && /wildcard/.test(check.reason)) continue;
      assert.ok(check.ok, email);
      const command = renderCommand(
        `printf '%s\\n' {email} "{domain}" '{local_part}'`,
        addressPlaceholders(check.address),
      );
      const output = execFileSync("/bin/sh", ["-c", command], { encoding: "utf8", cwd: "/" });
      assert.equal(output, `${email}\n${check.address.domain}\n${check.address.localPart}\n`, email);
    }
  });
});
