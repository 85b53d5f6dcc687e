import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { settingDefinitions } from "../src/accounts/settings.ts";
import { declaredRefusals } from "../src/errors.ts";
// Imported for their declarations: together they declare every refusal of the service.
import "../src/http/app.ts";
import { type AnyMessage, locales, type MessageKey, messagesOf } from "../src/i18n/catalogue.ts";
import "../src/import/dump.ts";
import "../src/import/userli.ts";
import "../src/services.ts";

/**
 * The catalogue is whole in every language: every language has exactly the English keys (the
 * types say so too; this holds whatever a cast or a generated file did), each text names the same
 * placeholders as its English text, and no key is left that the code never shows.
 */

const sourceRoot = join(import.meta.dirname, "../src");
const catalogueFiles = [join(sourceRoot, "i18n/areas"), join(sourceRoot, "i18n/languages")];

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return catalogueFiles.includes(path) ? [] : sourceFiles(path);
    return /\.(ts|eta|js)$/.test(entry.name) ? [path] : [];
  });
}

const placeholders = (text: string): string[] =>
  [...new Set([...text.matchAll(/\{(\w+)\}/g)].map((match) => match[1] ?? ""))].sort();

const formsOf = (message: AnyMessage): [string, string][] =>
  typeof message === "string" ? [["text", message]] : Object.entries(message);

describe("message catalogue: complete in every language", () => {
  const english = messagesOf("en");
  const keys = Object.keys(english).sort() as MessageKey[];

  test("every language has exactly the English keys", () => {
    assert.ok(keys.length > 500, `only ${keys.length} English texts`);
    for (const locale of locales) {
      const messages = messagesOf(locale);
      const own = Object.keys(messages);
      assert.deepEqual(
        keys.filter((key) => !Object.hasOwn(messages, key)),
        [],
        `${locale}: keys missing`,
      );
      assert.deepEqual(
        own.filter((key) => !Object.hasOwn(english, key)),
        [],
        `${locale}: keys English does not have`,
      );
      for (const key of keys) {
        for (const [form, text] of formsOf(messages[key]))
          assert.ok(text.trim().length > 0, `${locale} ${key} ${form} is empty`);
      }
    }
  });

  test("every text names the placeholders its English text names, no more and no fewer", () => {
    const differing: string[] = [];
    for (const key of keys) {
      const source = english[key];
      // A plural text may leave the count out of a fixed form ("one invite code"); every other
      // placeholder is in every form, as in English.
      const wanted = placeholders(
        formsOf(source)
          .map(([, text]) => text)
          .join(" "),
      );
      const beyondCount = wanted.filter((name) => name !== "count");
      for (const locale of locales) {
        const message = messagesOf(locale)[key];
        for (const [form, text] of formsOf(message)) {
          const named = placeholders(text);
          const same =
            typeof message === "string"
              ? named.join() === wanted.join()
              : named.filter((name) => name !== "count").join() === beyondCount.join() &&
                (form === "one" || named.includes("count"));
          if (!same)
            differing.push(
              `${locale} ${key} (${form}): {${named.join("}, {")}}, English {${wanted.join("}, {")}}`,
            );
        }
      }
    }
    assert.deepEqual(differing, [], "texts whose placeholders differ from English");
  });

  test("no key is unused: each is named in the code, or built from a refusal, setting or job name", () => {
    const source = sourceFiles(sourceRoot)
      .map((file) => readFileSync(file, "utf8"))
      .join("\n");
    const quoted = new Set([...source.matchAll(/["'`]([a-zA-Z][\w-]*(?:\.[\w-]+)+)["'`]/g)].map((m) => m[1]));
    const jobNames = [
      ...readFileSync(join(sourceRoot, "jobs/jobs.ts"), "utf8").matchAll(/name: "([\w-]+)"/g),
    ].map((m) => m[1]);
    assert.ok(jobNames.length >= 3, "the job names are read from jobs.ts");
    const built = new Set<string>([
      ...declaredRefusals().map((refusal) => `refusal.${refusal.code}`),
      ...Object.keys(settingDefinitions).flatMap((name) => [
        `admin.setting.${name}`,
        `admin.setting.${name}.hint`,
      ]),
      ...jobNames.map((name) => `admin.job.${name}`),
    ]);
    // A template that builds a key from a prefix and a value (`"admin.role." + role`) uses the
    // keys whose rest is a value the code names (`"ROLE_ADMIN"`).
    const prefixes = [...source.matchAll(/["'`]([a-z][\w-]*(?:\.[\w-]+)*\.)(?:["'`]\s*\+|\$\{)/g)].map(
      (m) => m[1] ?? "",
    );
    const values = new Set([...source.matchAll(/["'`]([\w-]+)["'`]/g)].map((m) => m[1]));
    const builtInCode = (key: string) =>
      prefixes.some((prefix) => key.startsWith(prefix) && values.has(key.slice(prefix.length)));
    const unused = keys.filter((key) => !quoted.has(key) && !built.has(key) && !builtInCode(key));
    assert.deepEqual(unused, [], "texts no page, e-mail or refusal shows");
  });
});
