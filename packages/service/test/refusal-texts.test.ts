import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { test } from "node:test";
import { type AnyRefusal, declaredRefusals } from "../src/errors.ts";
// Imported for their declarations: together they declare every refusal of the service.
import "../src/http/app.ts";
import { locales, type MessageKey, translator } from "../src/i18n/catalogue.ts";
import "../src/import/dump.ts";
import "../src/import/userli.ts";
import "../src/services.ts";

/**
 * Every refusal has its text for people: `refusal.<code>` in each language (areas/refusals.ts), naming
 * only the refusal's parameters; and no `refusal.*` text outlives its code.
 */

/**
 * Parameters a refusal has that its API text leaves out, so that calling the text cannot find them:
 * the pages say how long to wait, the API says it in the Retry-After header.
 */
const paramsBeyondApiText: Readonly<Record<string, readonly string[]>> = {
  "sign_in.throttled": ["retryAfter", "count"],
};

const placeholders = (text: string): string[] =>
  [...text.matchAll(/\{(\w+)\}/g)].map((match) => match[1] ?? "");

/** The parameters a refusal's API text names: called with `{name}` for every parameter. */
function parametersOf(definition: AnyRefusal): Set<string> {
  const names = new Set(paramsBeyondApiText[definition.code] ?? []);
  const params = new Proxy(
    {},
    { get: (_target, name) => (typeof name === "string" ? `{${name}}` : undefined) },
  );
  try {
    for (const name of placeholders(definition.apiText(params))) names.add(name);
  } catch {
    // A parameter that is no text (registration.refused's list of problems): no placeholder names it.
  }
  return names;
}

/** Every `refusal.*` key of the catalogue, in any area. */
async function refusalKeys(): Promise<Set<string>> {
  const keys = new Set<string>();
  const areas = new URL("../src/i18n/areas/", import.meta.url);
  for (const file of readdirSync(areas).filter((name) => name.endsWith(".ts"))) {
    const module: Record<string, unknown> = await import(new URL(file, areas).href);
    for (const value of Object.values(module)) {
      if (typeof value !== "object" || value === null) continue;
      for (const messages of Object.values(value))
        for (const key of Object.keys(messages ?? {})) if (key.startsWith("refusal.")) keys.add(key);
    }
  }
  return keys;
}

test("every declared refusal has its text in every language, naming only its parameters", () => {
  const declared = declaredRefusals();
  assert.ok(declared.length > 100, `only ${declared.length} refusals declared: a module is missing`);
  const problems: string[] = [];
  for (const definition of declared) {
    const key = `refusal.${definition.code}` as MessageKey;
    const params = parametersOf(definition);
    for (const locale of locales) {
      const text = translator(locale)(key, { count: 2 }) as string | undefined;
      if (text === undefined) {
        problems.push(`${locale}: ${key} is missing`);
        continue;
      }
      for (const name of placeholders(text))
        if (!params.has(name))
          problems.push(
            `${locale}: ${key} names {${name}}, not a parameter (${[...params].join(", ") || "none"})`,
          );
    }
  }
  assert.deepEqual(problems, []);
});

test("no refusal text is left without its declared code", async () => {
  const declared = new Set(declaredRefusals().map((definition) => `refusal.${definition.code}`));
  const stale = [...(await refusalKeys())].filter((key) => !declared.has(key)).sort();
  assert.deepEqual(stale, [], "texts of refusals no longer declared");
});
