import type { Locale } from "./catalogue.ts";

const formats: Record<Locale, Intl.DateTimeFormat> = {
  en: new Intl.DateTimeFormat("en-GB", { dateStyle: "medium", timeStyle: "short", timeZone: "UTC" }),
  de: new Intl.DateTimeFormat("de-DE", { dateStyle: "medium", timeStyle: "short", timeZone: "UTC" }),
};

/**
 * A moment (Unix seconds) as people of the locale write it, in UTC and saying so: the service
 * does not know the reader's time zone, and a time without its zone would be read as local.
 */
export const formatDateTime = (locale: Locale, seconds: number): string =>
  `${formats[locale].format(new Date(seconds * 1000))} UTC`;

const days: Record<Locale, Intl.DateTimeFormat> = {
  en: new Intl.DateTimeFormat("en-GB", { dateStyle: "medium", timeZone: "UTC" }),
  de: new Intl.DateTimeFormat("de-DE", { dateStyle: "medium", timeZone: "UTC" }),
};

/** The day (UTC) of a moment, for what is known to the day or the hour only ("last used"). */
export const formatDay = (locale: Locale, seconds: number): string =>
  days[locale].format(new Date(seconds * 1000));
