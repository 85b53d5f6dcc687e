import { area } from "./define.ts";

/** `/account/passkeys`, the passkey buttons of `/login` and `/2fa`, and the passkeys' refusals. */
export const passkeys = area({
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
  "refusal.passkey.challenge_void": "The passkey request expired or was already answered. Please try again.",
  "refusal.passkey.not_verified": "The passkey's answer could not be verified. Please try again.",
  "refusal.passkey.taken": "This passkey is registered already.",
  "refusal.passkey.none": "Signing in with a passkey alone needs a passkey. Add one first.",
});
