import { area } from "./define.ts";

/**
 * E-mails to users (plain text). Placeholders are filled with plain text; nothing here is HTML.
 * No secret ever goes into a message: links point at pages, never carry a token.
 */
export const mail = area({
  en: {
    "mail.greeting": "Hello,",
    "mail.signature": "Your team of {appName}\n{appUrl}",
    "mail.welcome.subject": "Welcome to {projectName}",
    "mail.welcome.body":
      "your new e-mail account {email} is ready.\n\nYou manage it (password, recovery token, two-factor authentication, aliases, OpenPGP key) at:\n{accountUrl}\n\nWhen your domain offers invite codes, you find yours at:\n{voucherUrl}\n\nKeep your recovery token in a safe place: it is the only way to a new password that keeps your encrypted mail readable.",
    "mail.aliasCreated.subject": "New alias address created",
    "mail.aliasCreated.body":
      "a new alias address was created for your account {email}:\n\n{alias}\n\nMail sent to this address arrives in your mailbox. You see and manage your aliases at:\n{aliasUrl}\n\nIf you did not create this alias, change your password at once.",
    "mail.recoveryStarted.subject": "The password for your e-mail account {email} will be reset",
    "mail.recoveryStarted.body":
      "someone has started the recovery of your e-mail account {email} with its recovery token.\n\nFrom {time} on, a new password can be set for the account at:\n{recoveryUrl}\n\nIf this was you, nothing else needs to be done.\n\nIf it was not you, sign in and create a new recovery token now; this stops the recovery and makes the old token useless:\n{recoveryTokenUrl}",
    "mail.guessing.subject": "Someone is guessing the password of {email}",
    "mail.guessing.body":
      "in the last day, {failures} attempts to sign in to your e-mail account {email} with a wrong password came from places your account has not signed in from before. The latest came from:\n{clients}\n\nUntil the attempts stop, only devices and addresses you signed in from before can sign in; your own sign-ins keep working.\n\nIf your password is weak or used elsewhere, change it now:\n{passwordUrl}",
  },
  de: {
    "mail.greeting": "Hallo,",
    "mail.signature": "Dein Team von {appName}\n{appUrl}",
    "mail.welcome.subject": "Willkommen bei {projectName}",
    "mail.welcome.body":
      "dein neues E-Mail-Konto {email} ist bereit.\n\nDu verwaltest es (Passwort, Wiederherstellungscode, Zwei-Faktor-Authentifizierung, Aliase, OpenPGP-Schlüssel) unter:\n{accountUrl}\n\nWenn deine Domain Einladungscodes anbietet, findest du deine unter:\n{voucherUrl}\n\nBewahre deinen Wiederherstellungscode sicher auf: Nur mit ihm kannst du ein neues Passwort setzen, ohne dass deine verschlüsselten E-Mails unlesbar werden.",
    "mail.aliasCreated.subject": "Neue Alias-Adresse angelegt",
    "mail.aliasCreated.body":
      "für dein Konto {email} wurde eine neue Alias-Adresse angelegt:\n\n{alias}\n\nE-Mails an diese Adresse landen in deinem Postfach. Deine Aliase siehst und verwaltest du unter:\n{aliasUrl}\n\nWenn du diesen Alias nicht angelegt hast, ändere sofort dein Passwort.",
    "mail.recoveryStarted.subject": "Das Passwort deines E-Mail-Kontos {email} wird zurückgesetzt",
    "mail.recoveryStarted.body":
      "jemand hat mit dem Wiederherstellungscode die Wiederherstellung deines E-Mail-Kontos {email} begonnen.\n\nAb {time} kann für das Konto ein neues Passwort gesetzt werden, unter:\n{recoveryUrl}\n\nWenn du das warst, ist nichts weiter zu tun.\n\nWenn du es nicht warst, melde dich an und erstelle jetzt einen neuen Wiederherstellungscode; das beendet die Wiederherstellung und macht den alten Code nutzlos:\n{recoveryTokenUrl}",
    "mail.guessing.subject": "Jemand versucht, das Passwort von {email} zu erraten",
    "mail.guessing.body":
      "am letzten Tag kamen {failures} Anmeldeversuche mit falschem Passwort bei deinem E-Mail-Konto {email} von Orten, von denen sich dein Konto noch nie angemeldet hat. Die letzten kamen von:\n{clients}\n\nSolange die Versuche andauern, können sich nur Geräte und Adressen anmelden, von denen du dich schon angemeldet hast; deine eigenen Anmeldungen funktionieren weiter.\n\nWenn dein Passwort schwach ist oder auch anderswo benutzt wird, ändere es jetzt:\n{passwordUrl}",
  },
});
