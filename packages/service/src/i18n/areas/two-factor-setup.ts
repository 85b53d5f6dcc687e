import { area } from "./define.ts";

/** `/account/twofactor`: enrolment, backup codes, switching off. */
export const twoFactorSetup = area({
  en: {
    "totpSetup.title": "Two-factor authentication",
    "totpSetup.intro":
      "With two-factor authentication, signing in needs a code from an authenticator app on your phone as well as your password.",
    "totpSetup.statusOn": "Two-factor authentication is on.",
    "totpSetup.statusOff": "Two-factor authentication is off.",
    "totpSetup.webOnly":
      "It protects the sign-in on this website. E-mail programs (IMAP, SMTP) still sign in with the password alone.",
    "totpSetup.enable": "Set up two-factor authentication",
    "totpSetup.disable": "Turn off two-factor authentication",
    "totpSetup.disableWarning":
      "Turning it off also makes your backup codes useless. Signing in will need only your password.",
    "totpSetup.confirmPassword": "Confirm with your password",
    "totpSetup.scanTitle": "Scan the code with your authenticator app",
    "totpSetup.scanIntro":
      "Open your authenticator app (for example FreeOTP, Aegis or Google Authenticator), add an account and scan this QR code.",
    "totpSetup.qrAlt": "QR code for your authenticator app",
    "totpSetup.manual": "Cannot scan? Enter this secret key in the app instead:",
    "totpSetup.uri": "Setup link (otpauth URI)",
    "totpSetup.confirmIntro": "Then enter the 6-digit code the app shows, to prove it works.",
    "totpSetup.code": "Verification code",
    "totpSetup.confirm": "Turn on",
    "totpSetup.cancel": "Cancel",
    "totpSetup.expired": "The setup took too long. Please start again.",
    "totpSetup.backupTitle": "Your backup codes",
    "totpSetup.backupIntro":
      "If you lose your phone, each of these codes signs you in once instead of a code from the app. Write them down or print them, and keep them in a safe place. They are shown only this once.",
    "totpSetup.backupAck": "I have stored the backup codes in a safe place.",
    "totpSetup.ackMissing": "This needs to be checked.",
    "totpSetup.continue": "Continue",
    "totpSetup.enabled": "Two-factor authentication is now on. Your other sessions have been signed out.",
    "totpSetup.disabled": "Two-factor authentication is now off.",
    "totpSetup.alreadyOn": "Two-factor authentication is already on.",
  },
  de: {
    "totpSetup.title": "Zwei-Faktor-Authentifizierung",
    "totpSetup.intro":
      "Mit Zwei-Faktor-Authentifizierung brauchst du zum Anmelden außer deinem Passwort auch einen Code aus einer Authenticator-App auf deinem Telefon.",
    "totpSetup.statusOn": "Die Zwei-Faktor-Authentifizierung ist eingeschaltet.",
    "totpSetup.statusOff": "Die Zwei-Faktor-Authentifizierung ist ausgeschaltet.",
    "totpSetup.webOnly":
      "Sie schützt die Anmeldung auf dieser Website. E-Mail-Programme (IMAP, SMTP) melden sich weiterhin nur mit dem Passwort an.",
    "totpSetup.enable": "Zwei-Faktor-Authentifizierung einrichten",
    "totpSetup.disable": "Zwei-Faktor-Authentifizierung ausschalten",
    "totpSetup.disableWarning":
      "Damit werden auch deine Backup-Codes ungültig. Zum Anmelden genügt dann wieder dein Passwort.",
    "totpSetup.confirmPassword": "Mit deinem Passwort bestätigen",
    "totpSetup.scanTitle": "Scanne den Code mit deiner Authenticator-App",
    "totpSetup.scanIntro":
      "Öffne deine Authenticator-App (zum Beispiel FreeOTP, Aegis oder Google Authenticator), füge ein Konto hinzu und scanne diesen QR-Code.",
    "totpSetup.qrAlt": "QR-Code für deine Authenticator-App",
    "totpSetup.manual": "Scannen klappt nicht? Gib stattdessen diesen geheimen Schlüssel in der App ein:",
    "totpSetup.uri": "Einrichtungslink (otpauth-URI)",
    "totpSetup.confirmIntro":
      "Gib dann den 6-stelligen Code ein, den die App anzeigt, um zu zeigen, dass es klappt.",
    "totpSetup.code": "Bestätigungscode",
    "totpSetup.confirm": "Einschalten",
    "totpSetup.cancel": "Abbrechen",
    "totpSetup.expired": "Die Einrichtung hat zu lange gedauert. Bitte fange noch einmal an.",
    "totpSetup.backupTitle": "Deine Backup-Codes",
    "totpSetup.backupIntro":
      "Wenn du dein Telefon verlierst, meldet dich jeder dieser Codes einmal an, anstelle eines Codes aus der App. Schreib sie auf oder drucke sie aus und bewahre sie sicher auf. Sie werden nur dieses eine Mal angezeigt.",
    "totpSetup.backupAck": "Ich habe die Backup-Codes sicher aufbewahrt.",
    "totpSetup.ackMissing": "Das muss angekreuzt werden.",
    "totpSetup.continue": "Weiter",
    "totpSetup.enabled":
      "Die Zwei-Faktor-Authentifizierung ist jetzt eingeschaltet. Deine anderen Sitzungen wurden abgemeldet.",
    "totpSetup.disabled": "Die Zwei-Faktor-Authentifizierung ist jetzt ausgeschaltet.",
    "totpSetup.alreadyOn": "Die Zwei-Faktor-Authentifizierung ist bereits eingeschaltet.",
  },
});
