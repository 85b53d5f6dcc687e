import { area } from "./define.ts";

/** The admin area's installation-wide pages: domains, invitations, keys, settings, tokens, webhooks, maintenance. */
export const adminSystem = area({
  en: {
    "admin.domains.title": "Domains",
  },
  de: {
    "admin.domains.title": "Domains",
  },
});
