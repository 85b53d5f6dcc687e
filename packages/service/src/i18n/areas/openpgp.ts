import { area } from "./define.ts";

/** `/account/openpgp`: the OpenPGP keys a user publishes through WKD. */
export const openpgp = area({
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
});
