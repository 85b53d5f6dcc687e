/**
 * The plural categories each language's grammar uses for whole numbers, as `Intl.PluralRules`
 * names them (its `resolvedOptions().pluralCategories`; a test holds the two together). A
 * language such as Polish would list one, few, many and other here, and its plural messages
 * would not build without them.
 */
export const pluralCategories = {
  en: ["one", "other"],
  de: ["one", "other"],
} as const satisfies Record<string, readonly Intl.LDMLPluralRule[]>;

type Language = keyof typeof pluralCategories;

/** A text that depends on a number: one form per plural category, chosen by the `count` parameter. */
export type Plural<L extends Language> = { readonly [C in (typeof pluralCategories)[L][number]]: string };

export type Message<L extends Language> = string | Plural<L>;

/**
 * One area of the catalogue: German must have exactly the keys English has, and a plural text
 * where English has one (and a plain text where English has a plain one).
 */
export function area<E extends Record<string, Message<"en">>>(messages: {
  en: E;
  de: { [K in keyof E]: E[K] extends string ? string : Plural<"de"> };
}) {
  return messages;
}
