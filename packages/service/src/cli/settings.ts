import type { Command } from "commander";
import { consoleActor } from "../accounts/admin-scope.ts";
import { out, withServices } from "./context.ts";

/** Settings: set one, list all. */
export function settingCommands(program: Command): void {
  program
    .command("app:setting:set")
    .description("change a setting")
    .argument("<name>", "setting name (see app:setting:list)")
    .argument("<value>", "new value")
    .action(async (name: string, value: string) => {
      await withServices((s) => s.admin.settings.update(consoleActor, { [name]: value }));
      out(`Setting ${name} updated`);
    });

  program
    .command("app:setting:list")
    .description("print every setting with its value")
    .action(async () => {
      const all = await withServices((s) => s.settings.all());
      for (const [name, value] of Object.entries(all)) out(`${name}=${JSON.stringify(value)}`);
    });
}
