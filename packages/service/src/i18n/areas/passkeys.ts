import { area } from "./define.ts";

/** `/account/passkeys`, the passkey buttons of `/login` and `/2fa`, and the passkeys' refusals. */
export const passkeys = area({
  en: {
    "passkeys.title": "Passkeys",
    "passkeys.intro":
      "A passkey signs you in with your phone, computer or security key (fingerprint, face or PIN) instead of a code from an authenticator app. It cannot be phished: it only works on this website.",
    "passkeys.link": "Passkeys",
    "passkeys.twoFactorHint":
      "With a passkey, two-factor authentication is on: signing in with your password then asks for the passkey or a code. Services that sign you in through this account elsewhere can only ask for a code: set up an authenticator app as well if they should ask for a second factor.",
    "passkeys.none": "You have no passkey yet.",
    "passkeys.mailAppsUsePassword":
      "Mail apps (IMAP and SMTP) ask for no second factor and still take your password alone.",
    "passkeys.toAppPasswords": "Give them app passwords and make them use those.",
    "passkeys.totpOffPasskeysOn":
      "Two-factor authentication is on with your passkeys. An authenticator app is not set up.",
    "passkeys.name": "Passkey name",
    "passkeys.nameHint": "So you can tell them apart, for example “Laptop” or “Phone”.",
    "passkeys.created": "Added",
    "passkeys.lastUsed": "Last used",
    "passkeys.neverUsed": "never",
    "passkeys.actions": "Actions",
    "passkeys.remove": "Remove",
    "passkeys.removeNamed": "Remove passkey {name}",
    "passkeys.removeTitle": "Remove the passkey “{name}”",
    "passkeys.removeWarning":
      "The passkey no longer signs you in. If it is your last passkey and TOTP is off, two-factor authentication is off too.",
    "passkeys.add": "Add a passkey",
    "passkeys.addSubmit": "Add passkey",
    "passkeys.confirmPassword": "Confirm with your password",
    "passkeys.needsScript":
      "Adding a passkey needs JavaScript in your browser. Signing in with your password works without it.",
    "passkeys.added": "The passkey “{name}” was added.",
    "passkeys.addedFirst":
      "The passkey “{name}” was added. Two-factor authentication is now on; your other sessions have been signed out.",
    "passkeys.removed": "The passkey was removed.",
    "passkeys.removedLast": "The passkey was removed. Two-factor authentication is now off.",
    "passkeys.signInTitle": "Sign in with a passkey alone",
    "passkeys.signInIntro":
      "When this is on, “Sign in with a passkey” on the sign-in page needs no password: the passkey (with your fingerprint, face or PIN) is enough.",
    "passkeys.signInOn": "Signing in with a passkey alone is on.",
    "passkeys.signInOff": "Signing in with a passkey alone is off.",
    "passkeys.signInLabel": "Sign in with a passkey alone",
    "passkeys.signInSave": "Save",
    "passkeys.signInSaved": "Saved.",
    "passkeys.failed": "The passkey did not answer or the browser cancelled. Please try again.",
    "passkeys.use": "Use a passkey",
    "passkeys.useIntro": "Or confirm with one of your passkeys:",
    "passkeys.signIn": "Sign in with a passkey",
    "passkeys.signInFailed": "This passkey could not sign you in.",
    "passkeys.signInOffForAccount":
      "Signing in with a passkey alone is not turned on for this account. Sign in with your password; you can turn it on under Passkeys.",
    "passkeys.accountDisabled": "This account cannot sign in with a passkey.",
    "refusal.passkey.no_app_url":
      "Passkeys cannot be added yet: the address of this web interface (app_url) is not set. Please tell the administrators.",
    "refusal.passkey.not_found": "Passkey not found.",
    "refusal.passkey.name_invalid": "Give the passkey a name of 1 to {max} characters.",
    "refusal.passkey.challenge_void":
      "The passkey request expired or was already answered. Please try again.",
    "refusal.passkey.not_verified": "The passkey's answer could not be verified. Please try again.",
    "refusal.passkey.taken": "This passkey is registered already.",
    "refusal.passkey.none": "Signing in with a passkey alone needs a passkey. Add one first.",
  },
  de: {
    "passkeys.title": "Passkeys",
    "passkeys.intro":
      "Ein Passkey meldet dich mit deinem Telefon, Computer oder Sicherheitsschlüssel an (Fingerabdruck, Gesicht oder PIN), statt mit einem Code aus einer Authenticator-App. Er lässt sich nicht abfischen: Er funktioniert nur auf dieser Website.",
    "passkeys.link": "Passkeys",
    "passkeys.twoFactorHint":
      "Mit einem Passkey ist die Zwei-Faktor-Authentifizierung eingeschaltet: Die Anmeldung mit Passwort fragt dann nach dem Passkey oder einem Code. Dienste, die dich anderswo über dieses Konto anmelden, können nur nach einem Code fragen: Richte zusätzlich eine Authenticator-App ein, wenn sie einen zweiten Faktor verlangen sollen.",
    "passkeys.none": "Du hast noch keinen Passkey.",
    "passkeys.mailAppsUsePassword":
      "Mail-Programme (IMAP und SMTP) fragen nach keinem zweiten Faktor und nehmen weiter dein Passwort allein.",
    "passkeys.toAppPasswords": "Gib ihnen App-Passwörter und lass sie nur diese verwenden.",
    "passkeys.totpOffPasskeysOn":
      "Die Zwei-Faktor-Authentifizierung ist mit deinen Passkeys eingeschaltet. Eine Authenticator-App ist nicht eingerichtet.",
    "passkeys.name": "Name des Passkeys",
    "passkeys.nameHint": "Damit du sie unterscheiden kannst, zum Beispiel „Laptop“ oder „Telefon“.",
    "passkeys.created": "Hinzugefügt",
    "passkeys.lastUsed": "Zuletzt benutzt",
    "passkeys.neverUsed": "nie",
    "passkeys.actions": "Aktionen",
    "passkeys.remove": "Entfernen",
    "passkeys.removeNamed": "Passkey {name} entfernen",
    "passkeys.removeTitle": "Den Passkey „{name}“ entfernen",
    "passkeys.removeWarning":
      "Der Passkey meldet dich nicht mehr an. Ist es dein letzter Passkey und TOTP ist aus, ist auch die Zwei-Faktor-Authentifizierung aus.",
    "passkeys.add": "Passkey hinzufügen",
    "passkeys.addSubmit": "Passkey hinzufügen",
    "passkeys.confirmPassword": "Mit deinem Passwort bestätigen",
    "passkeys.needsScript":
      "Zum Hinzufügen eines Passkeys braucht dein Browser JavaScript. Die Anmeldung mit Passwort klappt auch ohne.",
    "passkeys.added": "Der Passkey „{name}“ wurde hinzugefügt.",
    "passkeys.addedFirst":
      "Der Passkey „{name}“ wurde hinzugefügt. Die Zwei-Faktor-Authentifizierung ist jetzt eingeschaltet; deine anderen Sitzungen wurden abgemeldet.",
    "passkeys.removed": "Der Passkey wurde entfernt.",
    "passkeys.removedLast":
      "Der Passkey wurde entfernt. Die Zwei-Faktor-Authentifizierung ist jetzt ausgeschaltet.",
    "passkeys.signInTitle": "Nur mit Passkey anmelden",
    "passkeys.signInIntro":
      "Ist das eingeschaltet, braucht „Mit Passkey anmelden“ auf der Anmeldeseite kein Passwort: Der Passkey (mit Fingerabdruck, Gesicht oder PIN) genügt.",
    "passkeys.signInOn": "Die Anmeldung nur mit Passkey ist eingeschaltet.",
    "passkeys.signInOff": "Die Anmeldung nur mit Passkey ist ausgeschaltet.",
    "passkeys.signInLabel": "Nur mit Passkey anmelden",
    "passkeys.signInSave": "Speichern",
    "passkeys.signInSaved": "Gespeichert.",
    "passkeys.failed":
      "Der Passkey hat nicht geantwortet oder der Browser hat abgebrochen. Bitte versuche es noch einmal.",
    "passkeys.use": "Passkey verwenden",
    "passkeys.useIntro": "Oder bestätige mit einem deiner Passkeys:",
    "passkeys.signIn": "Mit Passkey anmelden",
    "passkeys.signInFailed": "Dieser Passkey konnte dich nicht anmelden.",
    "passkeys.signInOffForAccount":
      "Die Anmeldung nur mit Passkey ist für dieses Konto nicht eingeschaltet. Melde dich mit deinem Passwort an; unter Passkeys kannst du sie einschalten.",
    "passkeys.accountDisabled": "Dieses Konto kann sich nicht mit einem Passkey anmelden.",
    "refusal.passkey.no_app_url":
      "Passkeys können noch nicht hinzugefügt werden: Die Adresse dieser Weboberfläche (app_url) ist nicht eingestellt. Bitte sag den Administratoren Bescheid.",
    "refusal.passkey.not_found": "Passkey nicht gefunden.",
    "refusal.passkey.name_invalid": "Gib dem Passkey einen Namen mit 1 bis {max} Zeichen.",
    "refusal.passkey.challenge_void":
      "Die Passkey-Anfrage ist abgelaufen oder wurde schon beantwortet. Bitte versuche es noch einmal.",
    "refusal.passkey.not_verified":
      "Die Antwort des Passkeys konnte nicht geprüft werden. Bitte versuche es noch einmal.",
    "refusal.passkey.taken": "Dieser Passkey ist bereits registriert.",
    "refusal.passkey.none": "Die Anmeldung nur mit Passkey braucht einen Passkey. Füge zuerst einen hinzu.",
  },
});
