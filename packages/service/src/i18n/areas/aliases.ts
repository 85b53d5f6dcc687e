import { area } from "./define.ts";

/** `/account/alias`: the user's random and custom aliases. */
export const aliases = area({
  "aliases.title": "Aliases",
  "aliases.intro":
    "An alias is another address for your mailbox: mail to it arrives in your inbox, and you can send from it.",
  "aliases.randomTitle": "Random aliases",
  "aliases.randomIntro":
    "A random alias is an address nobody can guess, for example for one shop or one newsletter. You can delete it when it gets spam.",
  "aliases.customTitle": "Custom aliases",
  "aliases.customIntro":
    "A custom alias is an address you choose. You can have {max}; only the administrators can delete one.",
  "aliases.none": "None yet.",
  "aliases.address": "Address",
  "aliases.note": "Note",
  "aliases.noteOptional": "Note (optional)",
  "aliases.noteHint": "Up to {max} characters, only for you: what the alias is for.",
  "aliases.created": "Created",
  "aliases.actions": "Actions",
  "aliases.localPart": "Alias name",
  "aliases.localPartHint": "Letters, digits, '-', '_' and '.'; the address will end with @{domain}.",
  "aliases.createRandom": "Create a random alias",
  "aliases.createCustom": "Create custom alias",
  "aliases.delete": "Delete",
  "aliases.randomLeft": {
    one: "You can create {count} more random alias.",
    other: "You can create {count} more random aliases.",
  },
  "aliases.customLeft": {
    one: "You can create {count} more custom alias.",
    other: "You can create {count} more custom aliases.",
  },
  "aliases.randomLimit": "You have reached the limit of {max} random aliases. Delete one to create another.",
  "aliases.customLimit": "You have reached the limit of {max} custom aliases.",
  "aliases.createdRandom": "Your new alias {address} is ready.",
  "aliases.createdCustom": "Your new alias {address} is ready.",
  "aliases.deleted": "The alias {address} has been deleted. The address cannot be used again.",
});
