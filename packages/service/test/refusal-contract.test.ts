import assert from "node:assert/strict";
import { globSync, readFileSync } from "node:fs";
import { describe, test } from "node:test";

/**
 * Refusals are values (src/errors.ts): a surface maps a refusal by its code, never by its words.
 * These checks read the surfaces' sources, so a page or route that starts reading an error's message
 * text again fails here instead of breaking silently when a service rewords a message.
 */
const src = new URL("../src/", import.meta.url);
const surfaces = ["web", "http", "cli", "openpgp"];
const sources = surfaces.flatMap((folder) =>
  globSync(`${folder}/**/*.ts`, { cwd: src }).map((file) => ({
    file,
    text: readFileSync(new URL(file, src), "utf8"),
  })),
);

/** Lines of the surfaces that match `pattern`, as `file:line: text`. */
const matching = (pattern: RegExp) =>
  sources.flatMap(({ file, text }) =>
    text
      .split("\n")
      .map((line, index) => ({ line, index }))
      .filter(({ line }) => pattern.test(line))
      .map(({ line, index }) => `${file}:${index + 1}: ${line.trim()}`),
  );

describe("surfaces map refusals by code", () => {
  test("the surfaces' sources are found", () => {
    for (const folder of surfaces)
      assert.ok(
        sources.some((s) => s.file.startsWith(`${folder}/`)),
        `no source read in ${folder}/`,
      );
  });

  test("no surface reads an error's message", () => {
    assert.deepEqual(matching(/\b(error|err|e|cause|reason|failure|refusal)\.message\b/), []);
  });

  test("no surface matches a pattern against a message text", () => {
    assert.deepEqual(
      matching(/\.test\(\s*[\w.]*message\b|\bmessage\b[\w.]*\.(match|startsWith|includes|endsWith)\(/),
      [],
    );
  });

  test("no surface makes a refusal from words and a kind", () => {
    assert.deepEqual(matching(/new ServiceError\(/), []);
  });

  test("the check can fail: it finds a message read in a sample", () => {
    const sample = 'if (/own account/.test(error.message)) return "x";';
    assert.ok(/\b(error|err|e|cause|reason|failure|refusal)\.message\b/.test(sample));
  });
});
