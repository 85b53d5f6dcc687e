import { area } from "./define.ts";

/** `/account/twofactor`: enrolment, backup codes, switching off. */
export const twoFactorSetup = area({
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
});
