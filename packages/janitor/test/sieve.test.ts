import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { constantValue, decide, forwardsAllMail, parse, SieveSyntaxError, tokenize } from "../src/sieve.ts";

describe("tokenizer", () => {
  test("skips hash and bracket comments and counts lines", () => {
    const tokens = tokenize("# a comment\n/* one\n two */ keep; # trailing\nstop;");
    assert.deepEqual(
      tokens.map((t) => [t.type, t.value, t.line]),
      [
        ["identifier", "keep", 3],
        ["punct", ";", 3],
        ["identifier", "stop", 4],
        ["punct", ";", 4],
        ["eof", "", 4],
      ],
    );
  });

  test("decodes quoted strings with escapes", () => {
    const [token] = tokenize('"a \\"quoted\\" back\\\\slash \\x"');
    assert.equal(token?.type, "string");
    assert.equal(token?.value, 'a "quoted" back\\slash x');
  });

  test("reads text: strings with dot-stuffing, comments after text: and CRLF", () => {
    const tokens = tokenize("text: # comment\r\nline one\r\n..dotted\r\n.\r\nkeep;");
    assert.equal(tokens[0]?.type, "string");
    assert.equal(tokens[0]?.value, "line one\r\n.dotted\r\n");
    assert.equal(tokens[1]?.value, "keep");
    assert.equal(tokens[1]?.line, 5);
  });

  test("numbers carry K, M and G quantifiers; tags are lower-cased", () => {
    const tokens = tokenize("size :OVER 100K 2M 1G 7");
    assert.deepEqual(
      tokens.slice(0, 6).map((t) => (t.type === "number" ? t.number : t.value)),
      ["size", "over", 100 * 1024, 2 * 1024 ** 2, 1024 ** 3, 7],
    );
  });

  test("reports unterminated strings and comments with their line", () => {
    assert.throws(
      () => tokenize('keep;\n"open'),
      (e: unknown) => e instanceof SieveSyntaxError && e.line === 2,
    );
    assert.throws(() => tokenize("/* open"), SieveSyntaxError);
    assert.throws(() => tokenize("text:\nno end\n"), SieveSyntaxError);
    assert.throws(() => tokenize("text: keep\n.\n"), SieveSyntaxError);
    assert.throws(() => tokenize("keep @"), SieveSyntaxError);
  });
});

describe("parser", () => {
  test("parses require lists, tests, test lists and nested blocks", () => {
    const commands = parse(`require ["fileinto", "copy"];
if anyof (header :contains "subject" ["a", "b"], not exists "x") {
  if size :over 10K { discard; }
} elsif true { stop; } else { keep; }`);
    assert.deepEqual(
      commands.map((c) => c.name),
      ["require", "if", "elsif", "else"],
    );
    assert.deepEqual(commands[0]?.args, [{ kind: "strings", values: ["fileinto", "copy"] }]);
    const test0 = commands[1]?.tests[0];
    assert.equal(test0?.name, "anyof");
    assert.deepEqual(
      test0?.tests.map((t) => t.name),
      ["header", "not"],
    );
    assert.deepEqual(test0?.tests[0]?.args, [
      { kind: "tag", name: "contains" },
      { kind: "strings", values: ["subject"] },
      { kind: "strings", values: ["a", "b"] },
    ]);
    assert.equal(commands[1]?.block?.[0]?.tests[0]?.args[1]?.kind, "number");
  });

  test("rejects structural errors", () => {
    for (const script of [
      "keep",
      "if true keep;",
      "else { keep; }",
      "elsif true { keep; }",
      "if { keep; }",
      "redirect;",
      'redirect ["a@b", "c@d"];',
      'redirect "a@b" :copy;',
      "require 1;",
      "if true { keep; ",
      "keep; }",
      '["a", ]',
      "if anyof() { keep; }",
      "if not { keep; }",
      "keep { }",
    ]) {
      assert.throws(() => parse(script), SieveSyntaxError, script);
    }
  });

  test("folds constant tests", () => {
    const value = (test: string) => constantValue(parse(`if ${test} { keep; }`)[0]?.tests[0] as never);
    assert.equal(value("true"), true);
    assert.equal(value("false"), false);
    assert.equal(value("not true"), false);
    assert.equal(value("not not true"), true);
    assert.equal(value("anyof(false, true)"), true);
    assert.equal(value("allof(true, true)"), true);
    assert.equal(value("allof(true, false)"), false);
    assert.equal(value('allof(true, exists "x")'), null);
    assert.equal(value('header :is "x" "y"'), null);
  });
});

// Each case: a script and whether it forwards all mail (and keeps nothing).
const cases: [name: string, script: string, forwards: boolean][] = [
  ["plain top-level redirect", 'redirect "alice@elsewhere.example";', true],
  [
    "if true redirect (managesieve style)",
    'require ["fileinto"];\n# rule:[forward]\nif true\n{\n\tredirect "a@b.example";\n}\n',
    true,
  ],
  ["empty script", "", false],
  ["only comments", "# nothing here\n/* nor here */\n", false],
  ["only keep", "keep;", false],
  ["redirect then keep", 'redirect "a@b.example";\nkeep;', false],
  ["keep then redirect", 'keep;\nredirect "a@b.example";', false],
  ["redirect :copy alone", 'require "copy";\nredirect :copy "a@b.example";', false],
  [
    "redirect :copy then plain redirect",
    'require "copy";\nredirect :copy "a@b.example";\nredirect "c@d.example";',
    true,
  ],
  ["redirect then fileinto", 'require "fileinto";\nredirect "a@b.example";\nfileinto "Archive";', false],
  ["redirect inside a header test", 'if header :contains "from" "boss" { redirect "a@b.example"; }', false],
  ["redirect inside not true", 'if not true { redirect "a@b.example"; }', false],
  ["redirect inside if false", 'if false { redirect "a@b.example"; }', false],
  [
    "redirect in else of a real test",
    'if exists "x-spam" { discard; } else { redirect "a@b.example"; }',
    false,
  ],
  [
    "redirect in elsif true after a real test",
    'if exists "x" { discard; } elsif true { redirect "a@b.example"; }',
    false,
  ],
  [
    "redirect in elsif true after if false",
    'if false { keep; } elsif true { redirect "a@b.example"; }',
    true,
  ],
  ["if true with dead else keep", 'if true { redirect "a@b.example"; } else { keep; }', true],
  ["nested if true blocks", 'if true { if true { if not false { redirect "a@b.example"; } } }', true],
  [
    "nested block with real test inside if true",
    'if true { if size :over 1M { redirect "a@b.example"; } }',
    false,
  ],
  ["anyof(true) counts as constant", 'if anyof(true) { redirect "a@b.example"; }', true],
  ["allof(true, real test) does not", 'if allof(true, exists "x") { redirect "a@b.example"; }', false],
  ["stop before redirect", 'stop;\nredirect "a@b.example";', false],
  [
    "conditional stop before redirect",
    'if header :contains "subject" "x" { stop; }\nredirect "a@b.example";',
    false,
  ],
  ["stop after redirect hides later keep", 'redirect "a@b.example";\nstop;\nkeep;', true],
  ["if true redirect and stop, keep afterwards", 'if true { redirect "a@b.example"; stop; }\nkeep;', true],
  ["conditional keep elsewhere", 'if header :is "x" "y" { keep; }\nredirect "a@b.example";', false],
  [
    "conditional fileinto in spam rule with stop",
    'require "fileinto";\nif header :contains "X-Spam" "yes" { fileinto "Junk"; stop; }\nredirect "a@b.example";',
    false,
  ],
  [
    "multiple redirects and other actions",
    'require ["vacation","imap4flags"];\nredirect "a@b.example";\nredirect "c@d.example";\naddflag "\\\\Seen";\nvacation "away";',
    true,
  ],
  [
    "conditional redirect plus unconditional one",
    'if header :is "from" "x@y" { redirect "boss@b.example"; }\nredirect "a@b.example";',
    true,
  ],
  ["discard then redirect still forwards", 'discard;\nredirect "a@b.example";', true],
  [
    "unknown command (include) is not judged",
    'require "include";\ninclude :personal "other";\nredirect "a@b.example";',
    false,
  ],
  [
    "text: string with braces and a fake redirect inside",
    'require "vacation";\nvacation text:\nredirect "nobody@x";\n..hidden { keep; }\n.\n;\nredirect "a@b.example";',
    true,
  ],
  ["bracket comment hiding a keep", '/* keep; */\nredirect /* inline */ "a@b.example"; # keep;', true],
  ["keep hidden only in a string", 'redirect "keep; stop;";', true],
  [
    "redirect with an extension's tagged argument",
    'require ["enotify", "redirect-dsn"];\nredirect :notify "never" "a@b.example";',
    true,
  ],
  ["case-insensitive identifiers", 'IF TRUE { REDIRECT "a@b.example"; }', true],
  ["REDIRECT :COPY upper case", 'REDIRECT :COPY "a@b.example";', false],
  ["require list spanning lines", 'require [\n  "fileinto",\n  "copy"\n];\nredirect "a@b.example";', true],
  ["parse error: missing semicolon", 'redirect "a@b.example"', false],
  ["parse error: unbalanced braces", 'if true { redirect "a@b.example";', false],
  ["redirect after if true with stop in its block", 'if true { stop; }\nredirect "a@b.example";', false],
];

describe("forwardsAllMail", () => {
  test(`covers at least 20 scripts (${cases.length})`, () => {
    assert.ok(cases.length >= 20);
  });
  for (const [name, script, expected] of cases) {
    test(name, () => {
      const decision = decide(script);
      assert.equal(decision.forwardsAll, expected, decision.reason);
      assert.equal(forwardsAllMail(script), expected);
    });
  }

  test("parse errors say so in the reason", () => {
    const decision = decide('if true { redirect "a@b";');
    assert.equal(decision.forwardsAll, false);
    assert.match(decision.reason, /^parse error: line 1/);
  });
});
