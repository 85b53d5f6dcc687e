import { area } from "./define.ts";

/** The first-run setup, /init. */
export const init = area({
  "init.title": "First-run setup",
  "init.submit": "Continue",
  "init.code": "Set-up code",
  "init.code.hint":
    'Proves you run this service: it is in the service\'s log at start ("set-up code: …"), and bin/console app:setup:code prints it.',
  "init.domain.title": "Step 1 of 3: the primary domain",
  "init.domain.intro":
    "The first domain this service manages. People sign in with only the part before the @ on it, and its postmaster becomes the first administrator.",
  "init.domain.name": "Domain name",
  "init.domain.hint": "For example example.org (an international name in its xn-- form).",
  "init.admin.title": "Step 2 of 3: the administrator",
  "init.admin.intro": "The first administrator is {email}. Choose its password.",
  "init.admin.password": "Password",
  "init.admin.passwordRepeat": "Repeat password",
  "init.settings.title": "Step 3 of 3: the basic settings",
  "init.settings.intro": "Administrators can change these later.",
  "init.settings.save": "Save settings",
  "init.settings.app_name": "Name of this service",
  "init.settings.app_url": "Address of this web interface",
  "init.settings.project_name": "Project name",
  "init.settings.project_url": "Project web site",
  "init.settings.email_sender_address": "Sender address of e-mails",
  "init.settings.email_notification_address": "Address for reports to the operators",
  "init.settings.postmaster_address": "Where mail to postmaster@ of every domain goes",
  "init.settings.webmail_url": "Webmail address (optional)",
  "init.settings.mail_crypt": "Mailbox encryption (MailCrypt)",
  "init.settings.mail_crypt.0": "Off",
  "init.settings.mail_crypt.1": "Optional (accounts that have keys)",
  "init.settings.mail_crypt.2": "On for new accounts",
  "init.settings.mail_crypt.3": "On for all accounts (keys made at the next sign-in)",
  "init.configured": "The service is set up.",
});
