import { account } from "./areas/account.ts";
import { admin } from "./areas/admin.ts";
import { adminSystem } from "./areas/admin-system.ts";
import { adminUsers } from "./areas/admin-users.ts";
import { aliases } from "./areas/aliases.ts";
import { appPasswords } from "./areas/app-passwords.ts";
import { common } from "./areas/common.ts";
import type { Language, Message, Plural } from "./areas/define.ts";
import { init } from "./areas/init.ts";
import { mail } from "./areas/mail.ts";
import { openpgp } from "./areas/openpgp.ts";
import { passkeys } from "./areas/passkeys.ts";
import { recovery } from "./areas/recovery.ts";
import { refusals } from "./areas/refusals.ts";
import { registration } from "./areas/registration.ts";
import { signIn } from "./areas/sign-in.ts";
import { twoFactorSetup } from "./areas/two-factor-setup.ts";
import { de } from "./languages/de.ts";

/**
 * Every text a person reads (pages and e-mails) comes from this catalogue. English is the source:
 * each area file holds its English texts. Every other language is one file in `languages/`, typed
 * as a `Translation` of the English keys, so a missing or unknown key (or a plural text without
 * the forms its language needs) is a compile error: a language is complete or does not build.
 * The order is the switcher's.
 */
export const locales = ["en", "de"] as const satisfies readonly Language[];
export type Locale = (typeof locales)[number];
export const defaultLocale: Locale = "en";

// One line per area: each page area owns its file and its line here.
// biome-ignore format: one area per line
const areas = [
  common,
  signIn,
  account,
  twoFactorSetup,
  passkeys,
  aliases,
  openpgp,
  mail,
  recovery,
  registration,
  init,
  admin,
  adminUsers,
  adminSystem,
  refusals,
  appPasswords,
] as const;

// Conditional types distribute over the union of areas (a plain `keyof` of a union is its common keys).
type KeysOf<A> = A extends unknown ? keyof A & string : never;
export type MessageKey = KeysOf<(typeof areas)[number]>;
type PluralKeysOf<A> = A extends unknown
  ? { [K in keyof A]: A[K] extends string ? never : K }[keyof A] & string
  : never;
/** The keys of texts with plural forms: they need a `count`. */
export type PluralKey = PluralKeysOf<(typeof areas)[number]>;

/** A language's texts: exactly the English keys, each plural text with its language's forms. */
export type Translation<L extends Language> = {
  readonly [K in MessageKey]: K extends PluralKey ? Plural<L> : string;
};

function mergeEnglish(): Record<MessageKey, Message<"en">> {
  const merged: Record<string, Message<"en">> = {};
  for (const messages of areas) {
    for (const [key, text] of Object.entries(messages)) {
      if (Object.hasOwn(merged, key)) throw new Error(`message key ${key} is defined by two areas`);
      merged[key] = text;
    }
  }
  return merged as Record<MessageKey, Message<"en">>;
}

/** A text as any language holds it: plain, or the plural forms of its language (always with `other`). */
export type AnyMessage =
  | string
  | (Readonly<Partial<Record<Intl.LDMLPluralRule, string>>> & { readonly other: string });

const catalogue: Record<Locale, Readonly<Record<MessageKey, AnyMessage>>> = {
  en: mergeEnglish(),
  de,
};

/** Every message of a locale as the areas define it (plain texts and plural forms), for the tests. */
export const messagesOf = (locale: Locale): Readonly<Record<MessageKey, AnyMessage>> => catalogue[locale];

/** Each language in its own name (its `language.name`), as the switcher lists it. */
export const localeNames: Readonly<Record<Locale, string>> = Object.fromEntries(
  locales.map((locale) => [locale, catalogue[locale]["language.name"] as string]),
) as Record<Locale, string>;

export const isLocale = (value: unknown): value is Locale =>
  typeof value === "string" && (locales as readonly string[]).includes(value);

export type Params = Record<string, string | number>;
export type Translate = <K extends MessageKey>(
  key: K,
  ...params: K extends PluralKey ? [params: Params & { count: number }] : [params?: Params]
) => string;

/**
 * `{name}` placeholders are replaced by the params; the result is text, escaped where it is used.
 * A plural text takes the form `Intl.PluralRules` chooses for its `count` in the locale.
 */
export function translator(locale: Locale): Translate {
  const messages = catalogue[locale];
  const plurals = new Intl.PluralRules(locale);
  return (key, ...[params]: [Params?]) => {
    const message: AnyMessage | undefined = messages[key];
    let text = message as string;
    if (typeof message === "object") {
      const count = params?.count;
      // A plural text without its number is a bug of the caller, not something to guess.
      if (typeof count !== "number") throw new Error(`message ${key} needs a numeric count`);
      text = message[plurals.select(count)] ?? message.other;
    }
    if (!params) return text;
    return text.replace(/\{(\w+)\}/g, (whole, name: string) =>
      Object.hasOwn(params, name) ? String(params[name]) : whole,
    );
  };
}

/** Tags a browser may send for a language the catalogue holds under another: "no" is Norwegian, written as Bokmål. */
const languageAliases: Readonly<Record<string, string>> = { no: "nb" };

/** The first supported language of an `Accept-Language` header, by its weights; English otherwise. */
export function negotiateLocale(acceptLanguage: string | undefined): Locale {
  if (!acceptLanguage) return defaultLocale;
  const wanted = acceptLanguage
    .split(",")
    .map((part, index) => {
      const [tag = "", ...options] = part.trim().split(";");
      const q = options.map((o) => /^\s*q=([0-9.]+)\s*$/.exec(o)).find(Boolean);
      return { tag: tag.toLowerCase().split("-")[0] ?? "", q: q ? Number(q[1]) : 1, index };
    })
    .filter((entry) => entry.q > 0)
    .sort((a, b) => b.q - a.q || a.index - b.index);
  return wanted.map((entry) => languageAliases[entry.tag] ?? entry.tag).find(isLocale) ?? defaultLocale;
}
