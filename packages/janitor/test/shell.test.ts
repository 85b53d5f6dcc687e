import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { after, describe, test } from "node:test";
import { runShellCommand } from "../src/purger.ts";
import { parseAddress, renderCommand, renderPath, shellQuote } from "../src/shell.ts";
import { cleanup, processGone, tempDir, waitFor } from "./helpers.ts";

const dirs: string[] = [];
after(() => cleanup(...dirs));

describe("address checks", () => {
  test("accepts plain addresses and splits them", () => {
    for (const good of [
      "alice@example.org",
      "first.last@example.org",
      "user+tag@sub.example.org",
      "under_score-dash=eq@example.org",
      "Mixed.Case@Example.ORG",
      "jürgen@bücher.example",
      "1234@xn--bcher-kva.example",
    ]) {
      const check = parseAddress(good);
      assert.ok(check.ok, `${good}: ${check.ok ? "" : check.reason}`);
    }
    const check = parseAddress("First.Last@Example.org");
    assert.ok(check.ok);
    assert.deepEqual(check.address, {
      email: "First.Last@Example.org",
      localPart: "First.Last",
      domain: "Example.org",
      key: "first.last@example.org",
    });
  });

  // Symbols such as % * ? ~ ' are accepted (older versions of the service created them) and quoted:
  // see address-syntax.test.ts and the shared address-cases.json.
  test("rejects anything that could inject, glob or traverse", () => {
    for (const bad of [
      "a$(touch pwned)@b",
      "a`id`@b",
      "a;rm -rf /@b",
      "a&b@c",
      "a|b@c",
      "a<b@c",
      "a>b@c",
      "a(b)@c",
      "a{b}@c",
      "a!b@c",
      "a#b@c",
      "a[1]@example.org",
      "*@*",
      "a b@example.org",
      " a@example.org",
      "a@example.org ",
      "a\t@example.org",
      "a\n@example.org",
      "a\u0000@example.org",
      "a\u202e@example.org",
      'a"b@example.org',
      "a\\b@example.org",
      "a/b@example.org",
      "../x@example.org",
      ".@example.org",
      "..@example.org",
      "a..b@example.org",
      ".a@example.org",
      "a.@example.org",
      "-rf@example.org",
      "a@..",
      "a@.example.org",
      "a@example..org",
      "a@-example.org",
      "a@exa_mple.org",
      "a@b@c",
      "@example.org",
      "alice@",
      "alice",
      "",
      "a:b@example.org",
      "a,b@example.org",
      `${"x".repeat(65)}@example.org`,
      `a@${"x".repeat(250)}.org`,
    ]) {
      assert.equal(parseAddress(bad).ok, false, JSON.stringify(bad));
    }
    for (const notString of [undefined, null, 42, {}, ["a@b"]])
      assert.equal(parseAddress(notString).ok, false);
  });
});

describe("quoting and placeholders", () => {
  test("shellQuote makes one literal word", () => {
    assert.equal(shellQuote("a@b"), "'a@b'");
    assert.equal(shellQuote("it's"), "'it'\\''s'");
    assert.equal(shellQuote(""), "''");
  });

  test("renderCommand substitutes in bare, double-quoted and single-quoted positions", () => {
    const values = { email: "a@b.example", domain: "b.example", local_part: "a" };
    assert.equal(renderCommand("doveadm purge -u {email}", values), "doveadm purge -u 'a@b.example'");
    assert.equal(
      renderCommand('rm -rf "/var/vmail/{domain}/{local_part}"', values),
      `rm -rf "/var/vmail/"'b.example'"/"'a'""`,
    );
    assert.equal(renderCommand("echo '{email}'", values), "echo '''a@b.example'''");
    assert.equal(renderCommand("echo \\{email} {unknown}", values), "echo \\{email} {unknown}");
    // the doveadm example of docs/janitor.md
    assert.equal(
      renderCommand('doveadm -v expunge -u {email} mailbox "*" all && doveadm -v purge -u {email}', values),
      `doveadm -v expunge -u 'a@b.example' mailbox "*" all && doveadm -v purge -u 'a@b.example'`,
    );
  });

  test("renderPath substitutes verbatim", () => {
    assert.equal(
      renderPath("/var/vmail/{domain}/{local_part}/.dovecot.sieve", { domain: "b.example", local_part: "a" }),
      "/var/vmail/b.example/a/.dovecot.sieve",
    );
  });

  test("an injected address stays inert even without validation, in every quoting context", async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const evil = "a$(touch pwned)`touch pwned2`'\"; touch pwned3 #@b";
    const values = { email: evil, domain: "b$(touch pwned4)", local_part: "a;touch pwned5" };
    const template = `printf '%s\\n' {email} "x{domain}y" 'p{local_part}q' x{email}y`;
    const command = renderCommand(template, values);
    const output = execFileSync("/bin/sh", ["-c", command], { cwd: dir, encoding: "utf8" });
    assert.equal(output, `${evil}\nx${values.domain}y\np${values.local_part}q\nx${evil}y\n`);
    assert.deepEqual(readdirSync(dir), []);
  });

  test("a$(touch pwned)@b is rejected, and the command runner with it creates nothing", async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const address = "a$(touch pwned)@b";
    assert.equal(parseAddress(address).ok, false);
    const result = await runShellCommand(renderCommand("echo {email} > out", { email: address }), {
      timeoutMs: 10_000,
      cwd: dir,
    });
    assert.ok(result.ok);
    assert.equal(existsSync(`${dir}/pwned`), false);
    assert.deepEqual(readdirSync(dir), ["out"]);
  });
});

describe("runShellCommand", () => {
  test("reports exit code and output", async () => {
    const result = await runShellCommand("echo out; echo err >&2; exit 3", { timeoutMs: 10_000 });
    assert.equal(result.ok, false);
    assert.equal(result.exitCode, 3);
    assert.equal(result.stdout, "out\n");
    assert.equal(result.stderr, "err\n");
  });

  test("a timeout kills the whole process group", async () => {
    const dir = await tempDir();
    dirs.push(dir);
    const result = await runShellCommand(`sleep 30 & echo $! > ${dir}/child; wait`, { timeoutMs: 300 });
    assert.equal(result.ok, false);
    assert.equal(result.timedOut, true);
    const child = Number(execFileSync("cat", [`${dir}/child`], { encoding: "utf8" }));
    await waitFor("the background sleep to be gone", () => processGone(child));
  });

  test("large output is truncated", async () => {
    const result = await runShellCommand("head -c 100000 /dev/zero | tr '\\0' x", { timeoutMs: 10_000 });
    assert.ok(result.ok);
    assert.ok(result.stdout.length < 9000);
    assert.match(result.stdout, /\[truncated\]$/);
  });
});
