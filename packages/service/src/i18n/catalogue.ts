import { account } from "./areas/account.ts";
import { admin } from "./areas/admin.ts";
import { adminSystem } from "./areas/admin-system.ts";
import { adminUsers } from "./areas/admin-users.ts";
import { aliases } from "./areas/aliases.ts";
import { appPasswords } from "./areas/app-passwords.ts";
import { common } from "./areas/common.ts";
import type { Message } from "./areas/define.ts";
import { init } from "./areas/init.ts";
import { mail } from "./areas/mail.ts";
import { openpgp } from "./areas/openpgp.ts";
import { passkeys } from "./areas/passkeys.ts";
import { recovery } from "./areas/recovery.ts";
import { refusals } from "./areas/refusals.ts";
import { registration } from "./areas/registration.ts";
import { signIn } from "./areas/sign-in.ts";
import { twoFactorSetup } from "./areas/two-factor-setup.ts";

/**
 * Every text a person reads (pages and e-mails) comes from this catalogue. Each area is one file
 * holding English and German side by side; the type of `area` makes a missing German text a
 * compile error, so a locale is complete or does not build.
 */
export const locales = ["en", "de"] as const;
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

type KeysOf<A> = A extends { en: infer E } ? keyof E & string : never;
export type MessageKey = KeysOf<(typeof areas)[number]>;
type PluralKeysOf<A> = A extends { en: infer E }
  ? { [K in keyof E]: E[K] extends string ? never : K }[keyof E] & string
  : never;
/** The keys of texts with plural forms: they need a `count`. */
export type PluralKey = PluralKeysOf<(typeof areas)[number]>;

function merge(locale: Locale): Record<MessageKey, Message<Locale>> {
  const merged: Record<string, Message<Locale>> = {};
  for (const messages of areas) {
    for (const [key, text] of Object.entries(messages[locale])) {
      if (Object.hasOwn(merged, key)) throw new Error(`message key ${key} is defined by two areas`);
      merged[key] = text;
    }
  }
  return merged as Record<MessageKey, Message<Locale>>;
}

const catalogue: Record<Locale, Record<MessageKey, Message<Locale>>> = { en: merge("en"), de: merge("de") };

/** Every message of a locale as the areas define it (plain texts and plural forms), for the tests. */
export const messagesOf = (locale: Locale): Readonly<Record<MessageKey, Message<Locale>>> =>
  catalogue[locale];

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
    const message: Message<Locale> | undefined = messages[key];
    let text = message as string;
    if (typeof message === "object") {
      const count = params?.count;
      // A plural text without its number is a bug of the caller, not something to guess.
      if (typeof count !== "number") throw new Error(`message ${key} needs a numeric count`);
      text = (message as Record<string, string>)[plurals.select(count)] ?? message.other;
    }
    if (!params) return text;
    return text.replace(/\{(\w+)\}/g, (whole, name: string) =>
      Object.hasOwn(params, name) ? String(params[name]) : whole,
    );
  };
}

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
  return wanted.map((entry) => entry.tag).find(isLocale) ?? defaultLocale;
}
