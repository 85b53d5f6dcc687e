import { area } from "./define.ts";

export const recovery = area({
  en: {
    "recovery.title": "Recover your account",
    "recovery.intro":
      "Forgot your password? With your recovery token you can set a new one and your encrypted mail stays readable. For your safety, the new password can be set only two days after you start; the account is told by e-mail.",
    "recovery.email": "E-mail address",
    "recovery.emailInvalid": "Enter your full e-mail address, with the part after the @.",
    "recovery.token": "Recovery token",
    "recovery.tokenHint": "The token you stored when you created your account or your last token.",
    "recovery.tokenInvalid": "This token has an invalid format.",
    "recovery.submit": "Continue",
    "recovery.wrong": "The e-mail address or the recovery token is wrong.",
    "recovery.throttled": {
      one: "Too many failed attempts. Please wait {count} second and try again.",
      other: "Too many failed attempts. Please wait {count} seconds and try again.",
    },
    "recovery.waiting.title": "Recovery started",
    "recovery.waiting.started": "The recovery of {email} has started.",
    "recovery.waiting.mailed": "We have sent an e-mail about it to the account.",
    "recovery.waiting.text":
      "You can set the new password from {time} on. Come back then and enter your e-mail address and recovery token again.",
    "recovery.waiting.abort":
      "If you did not start this, sign in and create a new recovery token: that stops the recovery.",
    "recovery.expired":
      "This recovery has expired or is no longer valid. Enter your e-mail address and recovery token to start it again.",
    "recovery.reset.title": "Set a new password",
    "recovery.reset.intro":
      "Choose a new password for {email}. Your encrypted mail stays readable. Two-factor authentication will be turned off and every session signed out.",
    "recovery.reset.deadline": "Set it before {time}; after that the recovery has to start again.",
    "recovery.reset.submit": "Set new password",
    "recovery.done.title": "Your new password is active",
    "recovery.done.text":
      "Sign in with your new password. Two-factor authentication is off: turn it on again in your account if you used it.",
    "recovery.done.signIn": "Sign in",
  },
  de: {
    "recovery.title": "Konto wiederherstellen",
    "recovery.intro":
      "Passwort vergessen? Mit deinem Wiederherstellungscode kannst du ein neues setzen, und deine verschlüsselten E-Mails bleiben lesbar. Zu deiner Sicherheit kann das neue Passwort erst zwei Tage nach dem Start gesetzt werden; das Konto wird per E-Mail benachrichtigt.",
    "recovery.email": "E-Mail-Adresse",
    "recovery.emailInvalid": "Gib deine vollständige E-Mail-Adresse ein, mit dem Teil nach dem @.",
    "recovery.token": "Wiederherstellungscode",
    "recovery.tokenHint":
      "Der Code, den du beim Anlegen deines Kontos oder zuletzt erhalten und aufbewahrt hast.",
    "recovery.tokenInvalid": "Dieser Code hat ein ungültiges Format.",
    "recovery.submit": "Weiter",
    "recovery.wrong": "Die E-Mail-Adresse oder der Wiederherstellungscode ist falsch.",
    "recovery.throttled": {
      one: "Zu viele Fehlversuche. Bitte warte {count} Sekunde und versuche es dann noch einmal.",
      other: "Zu viele Fehlversuche. Bitte warte {count} Sekunden und versuche es dann noch einmal.",
    },
    "recovery.waiting.title": "Wiederherstellung gestartet",
    "recovery.waiting.started": "Die Wiederherstellung von {email} hat begonnen.",
    "recovery.waiting.mailed": "Wir haben dem Konto darüber eine E-Mail geschickt.",
    "recovery.waiting.text":
      "Das neue Passwort kannst du ab {time} setzen. Komm dann wieder und gib deine E-Mail-Adresse und deinen Wiederherstellungscode noch einmal ein.",
    "recovery.waiting.abort":
      "Wenn du das nicht warst, melde dich an und erstelle einen neuen Wiederherstellungscode: Das beendet die Wiederherstellung.",
    "recovery.expired":
      "Diese Wiederherstellung ist abgelaufen oder nicht mehr gültig. Gib deine E-Mail-Adresse und deinen Wiederherstellungscode ein, um sie neu zu starten.",
    "recovery.reset.title": "Neues Passwort setzen",
    "recovery.reset.intro":
      "Wähle ein neues Passwort für {email}. Deine verschlüsselten E-Mails bleiben lesbar. Die Zwei-Faktor-Authentifizierung wird abgeschaltet und jede Sitzung abgemeldet.",
    "recovery.reset.deadline": "Setze es vor {time}; danach muss die Wiederherstellung neu beginnen.",
    "recovery.reset.submit": "Neues Passwort setzen",
    "recovery.done.title": "Dein neues Passwort ist aktiv",
    "recovery.done.text":
      "Melde dich mit deinem neuen Passwort an. Die Zwei-Faktor-Authentifizierung ist aus: Schalte sie in deinem Konto wieder ein, wenn du sie genutzt hast.",
    "recovery.done.signIn": "Anmelden",
  },
});
