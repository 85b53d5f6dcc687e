import { area } from "./define.ts";

export const signIn = area({
  en: {
    "start.title": "Your e-mail account",
    "start.intro": "Sign in to manage your e-mail account, or register with an invite code.",
    "login.title": "Sign in",
    "login.email": "E-mail address",
    "login.emailHint": "Your full address, or only the part before the @ for {domain}.",
    "login.password": "Password",
    "login.submit": "Sign in",
    "login.failed": "The e-mail address or the password is wrong.",
    "login.throttled": {
      one: "Too many failed sign-ins. Please wait {count} second and try again.",
      other: "Too many failed sign-ins. Please wait {count} seconds and try again.",
    },
    "login.recoveryLink": "Forgot your password? Use your recovery token.",
    "login.signedOut": "You are now signed out.",
    "twoFactor.title": "Two-factor authentication",
    "twoFactor.intro": "Enter the code from your authenticator app, or one of your backup codes.",
    "twoFactor.code": "Verification code",
    "twoFactor.submit": "Verify",
    "twoFactor.invalid": "The verification code is not valid.",
    "twoFactor.cancel": "Cancel sign-in",
  },
  de: {
    "start.title": "Dein E-Mail-Konto",
    "start.intro":
      "Melde dich an, um dein E-Mail-Konto zu verwalten, oder registriere dich mit einem Einladungscode.",
    "login.title": "Anmelden",
    "login.email": "E-Mail-Adresse",
    "login.emailHint": "Deine vollständige Adresse, oder nur der Teil vor dem @ für {domain}.",
    "login.password": "Passwort",
    "login.submit": "Anmelden",
    "login.failed": "Die E-Mail-Adresse oder das Passwort ist falsch.",
    "login.throttled": {
      one: "Zu viele fehlgeschlagene Anmeldungen. Bitte warte {count} Sekunde und versuche es dann erneut.",
      other:
        "Zu viele fehlgeschlagene Anmeldungen. Bitte warte {count} Sekunden und versuche es dann erneut.",
    },
    "login.recoveryLink": "Passwort vergessen? Nutze deinen Wiederherstellungscode.",
    "login.signedOut": "Du bist jetzt abgemeldet.",
    "twoFactor.title": "Zwei-Faktor-Authentifizierung",
    "twoFactor.intro": "Gib den Code aus deiner Authenticator-App oder einen deiner Backup-Codes ein.",
    "twoFactor.code": "Bestätigungscode",
    "twoFactor.submit": "Bestätigen",
    "twoFactor.invalid": "Der Bestätigungscode ist ungültig.",
    "twoFactor.cancel": "Anmeldung abbrechen",
  },
});
