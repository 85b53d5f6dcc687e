import { area } from "./define.ts";

/** `/account/alias`: the user's random and custom aliases. */
export const aliases = area({
  en: {
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
    "aliases.deleteLabel": "Delete {address}",
    "aliases.randomLeft": {
      one: "You can create {count} more random alias.",
      other: "You can create {count} more random aliases.",
    },
    "aliases.customLeft": {
      one: "You can create {count} more custom alias.",
      other: "You can create {count} more custom aliases.",
    },
    "aliases.randomLimit":
      "You have reached the limit of {max} random aliases. Delete one to create another.",
    "aliases.customLimit": "You have reached the limit of {max} custom aliases.",
    "aliases.createdRandom": "Your new alias {address} is ready.",
    "aliases.createdCustom": "Your new alias {address} is ready.",
    "aliases.deleted": "The alias {address} has been deleted. The address cannot be used again.",
  },
  de: {
    "aliases.title": "Aliasse",
    "aliases.intro":
      "Ein Alias ist eine weitere Adresse für dein Postfach: E-Mails an ihn landen in deinem Posteingang, und du kannst von ihm aus senden.",
    "aliases.randomTitle": "Zufällige Aliasse",
    "aliases.randomIntro":
      "Ein zufälliger Alias ist eine Adresse, die niemand erraten kann, zum Beispiel für einen Shop oder einen Newsletter. Du kannst ihn löschen, wenn er Spam bekommt.",
    "aliases.customTitle": "Eigene Aliasse",
    "aliases.customIntro":
      "Ein eigener Alias ist eine Adresse, die du selbst wählst. Du kannst {max} haben; löschen können ihn nur die Administrator*innen.",
    "aliases.none": "Noch keine.",
    "aliases.address": "Adresse",
    "aliases.note": "Notiz",
    "aliases.noteOptional": "Notiz (optional)",
    "aliases.noteHint": "Bis zu {max} Zeichen, nur für dich: wofür der Alias da ist.",
    "aliases.created": "Erstellt",
    "aliases.actions": "Aktionen",
    "aliases.localPart": "Alias-Name",
    "aliases.localPartHint": "Buchstaben, Ziffern, '-', '_' und '.'; die Adresse endet auf @{domain}.",
    "aliases.createRandom": "Zufälligen Alias erstellen",
    "aliases.createCustom": "Eigenen Alias erstellen",
    "aliases.delete": "Löschen",
    "aliases.deleteLabel": "{address} löschen",
    "aliases.randomLeft": {
      one: "Du kannst noch {count} zufälligen Alias erstellen.",
      other: "Du kannst noch {count} zufällige Aliasse erstellen.",
    },
    "aliases.customLeft": {
      one: "Du kannst noch {count} eigenen Alias erstellen.",
      other: "Du kannst noch {count} eigene Aliasse erstellen.",
    },
    "aliases.randomLimit":
      "Du hast die Grenze von {max} zufälligen Aliassen erreicht. Lösche einen, um einen neuen zu erstellen.",
    "aliases.customLimit": "Du hast die Grenze von {max} eigenen Aliassen erreicht.",
    "aliases.createdRandom": "Dein neuer Alias {address} ist bereit.",
    "aliases.createdCustom": "Dein neuer Alias {address} ist bereit.",
    "aliases.deleted": "Der Alias {address} wurde gelöscht. Die Adresse kann nicht wieder verwendet werden.",
  },
});
