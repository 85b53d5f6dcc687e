import { type Locale, type MessageKey, translator } from "../i18n/catalogue.ts";
import { formatDateTime } from "../i18n/dates.ts";

/** One e-mail to one person, as the outbox stores it: plain text, no secret in it. */
export interface MailMessage {
  recipient: string;
  subject: string;
  body: string;
}

/** The settings a message is built from (read in the caller's transaction, see MailService). */
export interface MailSettings {
  appName: string;
  appUrl: string;
  projectName: string;
}

/** A link to one of our pages: `app_url` without its trailing slashes, then the path (as the reference). */
export const pageLink = (settings: MailSettings, path: string): string =>
  `${settings.appUrl.replace(/\/+$/, "")}${path}`;

function compose(
  locale: Locale,
  settings: MailSettings,
  recipient: string,
  subject: { key: MessageKey; params: Record<string, string> },
  body: { key: MessageKey; params: Record<string, string> },
): MailMessage {
  const t = translator(locale);
  const signature = t("mail.signature", {
    appName: settings.appName,
    appUrl: pageLink(settings, "/"),
  });
  return {
    recipient,
    // A header line: no line break may reach it, whatever a setting or an address holds.
    subject: t(subject.key, subject.params).replace(/[\r\n]+/g, " "),
    body: `${t("mail.greeting")}\n\n${t(body.key, body.params)}\n\n-- \n${signature}\n`,
  };
}

/** After registration (and restore): where the account is managed. No quota or invite-count promises. */
export function welcomeMessage(input: {
  email: string;
  locale: Locale;
  settings: MailSettings;
}): MailMessage {
  const { email, locale, settings } = input;
  return compose(
    locale,
    settings,
    email,
    { key: "mail.welcome.subject", params: { projectName: settings.projectName } },
    {
      key: "mail.welcome.body",
      params: {
        email,
        accountUrl: pageLink(settings, "/account"),
        voucherUrl: pageLink(settings, "/account/voucher"),
      },
    },
  );
}

/** To the owner of a new alias (random or custom). */
export function aliasCreatedMessage(input: {
  email: string;
  alias: string;
  locale: Locale;
  settings: MailSettings;
}): MailMessage {
  const { email, alias, locale, settings } = input;
  return compose(
    locale,
    settings,
    email,
    { key: "mail.aliasCreated.subject", params: {} },
    {
      key: "mail.aliasCreated.body",
      params: { email, alias, aliasUrl: pageLink(settings, "/account/alias") },
    },
  );
}

/** To the account itself when a recovery (re)starts: when the new password can be set, how to stop it. */
export function recoveryStartedMessage(input: {
  email: string;
  /** Unix seconds from which the new password can be set. */
  activeFrom: number;
  locale: Locale;
  settings: MailSettings;
}): MailMessage {
  const { email, activeFrom, locale, settings } = input;
  return compose(
    locale,
    settings,
    email,
    { key: "mail.recoveryStarted.subject", params: { email } },
    {
      key: "mail.recoveryStarted.body",
      params: {
        email,
        time: formatDateTime(locale, activeFrom),
        recoveryUrl: pageLink(settings, "/recovery"),
        recoveryTokenUrl: pageLink(settings, "/account/recovery-token"),
      },
    },
  );
}

/** To the account when its daily ceiling of failed sign-ins from unknown clients is reached (sign-in-guard.ts). */
export function guessingMessage(input: {
  email: string;
  failures: number;
  /** The latest client addresses the failures came from, newest first. */
  clients: string[];
  locale: Locale;
  settings: MailSettings;
}): MailMessage {
  const { email, failures, clients, locale, settings } = input;
  return compose(
    locale,
    settings,
    email,
    { key: "mail.guessing.subject", params: { email } },
    {
      key: "mail.guessing.body",
      params: {
        email,
        failures: String(failures),
        clients: clients.length > 0 ? clients.map((client) => `- ${client}`).join("\n") : "-",
        passwordUrl: pageLink(settings, "/account/password"),
      },
    },
  );
}
