import { area } from "./define.ts";

/**
 * E-mails to users (plain text). Placeholders are filled with plain text; nothing here is HTML.
 * No secret ever goes into a message: links point at pages, never carry a token.
 */
export const mail = area({
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
});
