import { area } from "./define.ts";

export const signIn = area({
  "start.title": "Your e-mail account",
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
});
