import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { pluralCategories } from "../src/i18n/areas/define.ts";
import { locales, messagesOf, translator } from "../src/i18n/catalogue.ts";

describe("message catalogue", () => {
  test("a count chooses the plural form, in English and German", () => {
    const en = translator("en");
    const de = translator("de");
    assert.equal(en("admin.domains.count", { count: 1 }), "1 domain.");
    assert.equal(en("admin.domains.count", { count: 2 }), "2 domains.");
    assert.equal(en("admin.domains.count", { count: 0 }), "0 domains.");
    assert.equal(de("admin.domains.count", { count: 1 }), "1 Domain.");
    assert.equal(de("admin.domains.count", { count: 2 }), "2 Domains.");
    assert.equal(en("aliases.randomLeft", { count: 1 }), "You can create 1 more random alias.");
    assert.equal(en("aliases.randomLeft", { count: 99 }), "You can create 99 more random aliases.");
    assert.equal(de("aliases.randomLeft", { count: 1 }), "Du kannst noch 1 zufälligen Alias erstellen.");
    assert.equal(de("aliases.randomLeft", { count: 99 }), "Du kannst noch 99 zufällige Aliasse erstellen.");
    assert.equal(en("admin.users.count", { count: 1 }), "1 user matches.");
    assert.equal(en("admin.users.count", { count: 3 }), "3 users match.");
    assert.equal(en("admin.users.countAtLeast", { count: 10000 }), "More than 10000 users match.");
    assert.equal(de("admin.audit.count", { count: 1 }), "1 Eintrag");
    assert.equal(de("admin.audit.count", { count: 5 }), "5 Einträge");
    assert.match(en("login.throttled", { count: 1 }), /wait 1 second and/);
    assert.match(de("login.throttled", { count: 30 }), /warte 30 Sekunden und/);
    // Plain texts are untouched by the plural machinery.
    assert.equal(en("aliases.createdRandom", { address: "a@b.org" }), "Your new alias a@b.org is ready.");
  });

  test("a plural text without a numeric count is refused, not guessed", () => {
    const en = translator("en");
    // @ts-expect-error the types already demand the count
    assert.throws(() => en("admin.domains.count"), /admin.domains.count needs a numeric count/);
    assert.throws(
      // @ts-expect-error a string is no count
      () => en("admin.domains.count", { count: "2" }),
      /needs a numeric count/,
    );
  });

  test("every plural text has exactly the forms its language needs, in both languages alike", () => {
    const english = messagesOf("en");
    let plurals = 0;
    for (const locale of locales) {
      const needed = [...new Intl.PluralRules(locale).resolvedOptions().pluralCategories].sort();
      assert.deepEqual([...pluralCategories[locale]].sort(), needed, `the categories declared for ${locale}`);
      const messages = messagesOf(locale);
      assert.deepEqual(Object.keys(messages).sort(), Object.keys(english).sort(), `${locale} has every key`);
      for (const [key, message] of Object.entries(messages)) {
        const inEnglish = english[key as keyof typeof english];
        assert.equal(typeof message, typeof inEnglish, `${locale} ${key}: plural where English is`);
        if (typeof message === "string") continue;
        if (locale === "en") plurals++;
        assert.deepEqual(Object.keys(message).sort(), needed, `${locale} ${key}`);
        for (const [form, text] of Object.entries(message))
          assert.ok(text.trim().length > 0, `${locale} ${key} ${form} is empty`);
        // Every form but a fixed "one" ("the one invite code") shows the number.
        assert.ok(message.other.includes("{count}"), `${locale} ${key}: other names the count`);
      }
    }
    assert.ok(plurals >= 15, `only ${plurals} plural texts`);
  });

  test("no text that shows a number still guesses its plural with (s) or (en)", () => {
    for (const locale of locales)
      for (const [key, message] of Object.entries(messagesOf(locale)))
        for (const text of typeof message === "string" ? [message] : Object.values(message))
          assert.doesNotMatch(text, /\w\((s|en|n)\)/, `${locale} ${key}`);
  });
});
