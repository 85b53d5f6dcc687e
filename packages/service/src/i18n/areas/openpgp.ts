import { area } from "./define.ts";

/** `/account/openpgp`: the OpenPGP keys a user publishes through WKD. */
export const openpgp = area({
  en: {
    "openpgp.title": "OpenPGP key",
    "openpgp.intro":
      "Publish your OpenPGP public key, so that e-mail programs can find it through the Web Key Directory (WKD) and send you encrypted mail. Only the parts of the key that belong to your address are published.",
    "openpgp.identities": "Your addresses",
    "openpgp.noKey": "No key published.",
    "openpgp.keyId": "Key ID",
    "openpgp.fingerprint": "Fingerprint",
    "openpgp.expires": "Expires",
    "openpgp.never": "never",
    "openpgp.delete": "Delete key",
    "openpgp.deleteLabel": "Delete the key of {email}",
    "openpgp.uploadTitle": "Upload a key",
    "openpgp.uploadIntro":
      "Choose a file with your public key, or paste the key. A key uploaded for an address replaces the one before.",
    "openpgp.identity": "For the address",
    "openpgp.file": "Key file",
    "openpgp.fileHint": "An exported public key (.asc or .gpg).",
    "openpgp.text": "Or paste the key",
    "openpgp.textHint": "It starts with -----BEGIN PGP PUBLIC KEY BLOCK-----.",
    "openpgp.upload": "Upload key",
    "openpgp.uploaded": "Your OpenPGP key got uploaded.",
    "openpgp.selectOne": "Please choose a file or paste a key, not both.",
    "openpgp.tooLarge": "The key is too large.",
    "openpgp.notIdentity": "You are not authorized to manage this identity.",
    "openpgp.deleteTitle": "Delete the OpenPGP key of {email}",
    "openpgp.deleteWarning":
      "The key is no longer published: e-mail programs will not find it for this address any more.",
    "openpgp.confirmPassword": "Confirm with your password",
    "openpgp.deleted": "The OpenPGP key of {email} has been deleted.",
    "openpgp.noStoredKey": "There is no key for this address.",
  },
  de: {
    "openpgp.title": "OpenPGP-Schlüssel",
    "openpgp.intro":
      "Veröffentliche deinen öffentlichen OpenPGP-Schlüssel, damit E-Mail-Programme ihn über das Web Key Directory (WKD) finden und dir verschlüsselte E-Mails senden können. Veröffentlicht werden nur die Teile des Schlüssels, die zu deiner Adresse gehören.",
    "openpgp.identities": "Deine Adressen",
    "openpgp.noKey": "Kein Schlüssel veröffentlicht.",
    "openpgp.keyId": "Schlüssel-ID",
    "openpgp.fingerprint": "Fingerabdruck",
    "openpgp.expires": "Läuft ab",
    "openpgp.never": "nie",
    "openpgp.delete": "Schlüssel löschen",
    "openpgp.deleteLabel": "Den Schlüssel von {email} löschen",
    "openpgp.uploadTitle": "Schlüssel hochladen",
    "openpgp.uploadIntro":
      "Wähle eine Datei mit deinem öffentlichen Schlüssel oder füge den Schlüssel ein. Ein für eine Adresse hochgeladener Schlüssel ersetzt den bisherigen.",
    "openpgp.identity": "Für die Adresse",
    "openpgp.file": "Schlüsseldatei",
    "openpgp.fileHint": "Ein exportierter öffentlicher Schlüssel (.asc oder .gpg).",
    "openpgp.text": "Oder füge den Schlüssel ein",
    "openpgp.textHint": "Er beginnt mit -----BEGIN PGP PUBLIC KEY BLOCK-----.",
    "openpgp.upload": "Schlüssel hochladen",
    "openpgp.uploaded": "Dein OpenPGP-Schlüssel wurde hochgeladen.",
    "openpgp.selectOne": "Bitte wähle eine Datei oder füge einen Schlüssel ein, nicht beides.",
    "openpgp.tooLarge": "Der Schlüssel ist zu groß.",
    "openpgp.notIdentity": "Du darfst diese Identität nicht verwalten.",
    "openpgp.deleteTitle": "Den OpenPGP-Schlüssel von {email} löschen",
    "openpgp.deleteWarning":
      "Der Schlüssel wird nicht mehr veröffentlicht: E-Mail-Programme finden ihn für diese Adresse nicht mehr.",
    "openpgp.confirmPassword": "Mit deinem Passwort bestätigen",
    "openpgp.deleted": "Der OpenPGP-Schlüssel von {email} wurde gelöscht.",
    "openpgp.noStoredKey": "Für diese Adresse gibt es keinen Schlüssel.",
  },
});
