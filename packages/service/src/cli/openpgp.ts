import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { consoleActor } from "../accounts/admin-scope.ts";
import { out, UsageError, withServices } from "./context.ts";

/** OpenPGP keys published through WKD: import, show, delete (the reference's arguments). */
export function openPgpCommands(program: Command): void {
  program
    .command("app:openpgp:import-key")
    .description("publish an OpenPGP key (armored or binary file) for an address through WKD")
    .argument("<email>", "the address")
    .argument("<file>", "key file")
    .action(async (email: string, file: string) => {
      const data = await readFile(file).catch(() => {
        throw new UsageError(`cannot read ${file}`);
      });
      const info = await withServices((s) =>
        s.admin.openPgpKeys.import(consoleActor, email, new Uint8Array(data)),
      );
      out(`Imported OpenPGP key for email ${info.email}: ${info.fingerprint}`);
    });

  program
    .command("app:openpgp:show-key")
    .argument("<email>", "the address")
    .description("show the published key of an address")
    .action(async (email: string) => {
      const info = await withServices((s) => s.openPgpKeys.get(email)).catch(() => null);
      out(
        info
          ? `OpenPGP key for email ${info.email}: ${info.fingerprint}`
          : `No OpenPGP key found for email ${email}`,
      );
    });

  program
    .command("app:openpgp:delete-key")
    .argument("<email>", "the address")
    .description("stop publishing the key of an address")
    .action(async (email: string) => {
      const info = await withServices((s) => s.admin.openPgpKeys.delete(consoleActor, email)).catch(
        () => null,
      );
      out(
        info
          ? `Deleted OpenPGP key for email ${info.email}: ${info.fingerprint}`
          : `No OpenPGP key found for email ${email}`,
      );
    });
}
