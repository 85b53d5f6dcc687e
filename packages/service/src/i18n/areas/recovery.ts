import { area } from "./define.ts";

export const recovery = area({
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
});
