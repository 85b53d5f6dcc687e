import { area } from "./define.ts";

/** The start page's invite-code form, /register, /account/voucher. */
export const registration = area({
  "registration.start.heading": "Register with an invite code",
  "registration.start.intro": "Got an invite code? Enter it to create your e-mail account.",
  "registration.code": "Invite code",
  "registration.code.submit": "Continue",
  "registration.title": "Create your e-mail account",
  "registration.intro":
    "Choose your address and a password. The address cannot be changed later and is never given to anyone else.",
  "registration.localPart": "E-mail address",
  "registration.localPartHint": "3 to 32 characters: lower-case letters, digits and . _ -",
  "registration.domainSuffix": "at {domain}",
  "registration.password": "Password",
  "registration.passwordRepeat": "Repeat password",
  "registration.submit": "Register",
  "registration.localPart.tooShort": "The username must contain at least {min} characters.",
  "registration.localPart.tooLong": "The username must contain at most {max} characters.",
  "registration.localPart.characters":
    "The username contains unexpected characters. Only valid: Letters and numbers, as well as -, _ and .",
  "registration.localPart.syntax":
    "The username must not start or end with a dot, contain two dots in a row or start with -.",
  "registration.localPart.taken": "The e-mail address is already taken.",
  "registration.registered": "You are now registered.",
  "registration.welcome.title": "Welcome to {project}!",
  "registration.welcome.address": "Your new address is {email}.",
  "registration.welcome.next": "What you can do next:",
  "registration.welcome.account": "Manage your account",
  "registration.welcome.webmail": "Read your mail in the webmail",
  "registration.welcome.twoFactor": "Protect your account with two-factor authentication",
  "registration.welcome.invite": "Invite people you trust",
  "registration.codes.title": "Invite codes",
  "registration.codes.intro":
    "Each invite code registers one new account at {domain}. Give them to people you trust.",
  "registration.codes.disabled": "Invitations are turned off for your domain.",
  "registration.codes.none": "You have no unused invite codes.",
  "registration.codes.code": "Code",
  "registration.codes.link": "Registration link",
  "registration.codes.due": {
    one: "You can get {count} invite code now.",
    other: "You can get {count} invite codes now.",
  },
  "registration.codes.get": "Get my invite codes",
  "registration.codes.waiting": "You can get invite codes from {date}.",
  "registration.codes.neverSignedIn":
    "You can get invite codes once you have signed in again (registering does not count as signing in).",
  "registration.codes.limitReached": {
    one: "You have received the one invite code of your domain.",
    other: "You have received all {count} invite codes of your domain.",
  },
  "registration.codes.noLimit": "Your domain hands out no invite codes by itself.",
  "registration.codes.multiplier": "You may create more invite codes than the limit of your domain.",
  "registration.codes.create": "Create invite code",
  "registration.codes.handedOut": {
    one: "You got {count} new invite code.",
    other: "You got {count} new invite codes.",
  },
  "registration.codes.nothingDue": "There are no invite codes for you right now.",
  "registration.codes.created": "New invite code created.",
});
