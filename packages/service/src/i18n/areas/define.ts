/**
 * The plural categories each language's grammar uses for whole numbers, as `Intl.PluralRules`
 * names them (its `resolvedOptions().pluralCategories`; a test holds the two together). Spanish,
 * French, Italian and Portuguese have a "many" form (used for a million and more); a language such
 * as Polish would list one, few, many and other here, and its plural messages would not build
 * without them.
 */
export const pluralCategories = {
  en: ["one", "other"],
  de: ["one", "other"],
  es: ["one", "many", "other"],
  fr: ["one", "many", "other"],
  it: ["one", "many", "other"],
  pt: ["one", "many", "other"],
  nb: ["one", "other"],
  gsw: ["one", "other"],
} as const satisfies Record<string, readonly Intl.LDMLPluralRule[]>;

export type Language = keyof typeof pluralCategories;

/** A text that depends on a number: one form per plural category, chosen by the `count` parameter. */
export type Plural<L extends Language> = { readonly [C in (typeof pluralCategories)[L][number]]: string };

export type Message<L extends Language> = string | Plural<L>;

/** One area of the catalogue, in English: the source every translation is checked against. */
export function area<E extends Record<string, Message<"en">>>(messages: E): E {
  return messages;
}
