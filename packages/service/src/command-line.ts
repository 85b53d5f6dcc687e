import { configVariableHelp } from "./config.ts";
import { nodeVersion, serviceVersion } from "./version.ts";

/** `--help`: how to start the service and every variable it reads, with its default. */
export function helpText(): string {
  const entries = Object.entries(configVariableHelp);
  const width = Math.max(...entries.map(([name, { default: value }]) => `${name}=${value}`.length)) + 2;
  const lines = entries.map(([name, { default: value, meaning }]) => {
    const setting = `${name}=${value}`;
    // A long default (the SQLite path) gets its own line rather than pushing every meaning right.
    return setting.length > 40
      ? `  ${setting}\n  ${" ".repeat(Math.min(width, 40))}${meaning}`
      : `  ${setting.padEnd(Math.min(width, 40))}${meaning}`;
  });
  return [
    `Usage: mail-account-service [--help | --version]`,
    `Mail account service ${serviceVersion}: the account API for Dovecot, Postfix and the janitor.`,
    "Configured through environment variables; unset or empty means the default shown:",
    ...lines,
    "Operator console: bin/console --help",
    "",
  ].join("\n");
}

/**
 * Answers `--version` and `--help` (true: answered, do not start). Any other argument is refused
 * with one line and exit code 2 rather than ignored, so a mistyped option does not start a service.
 */
export function handleCommandLine(args: readonly string[]): boolean {
  if (args.length === 0) return false;
  const [first] = args;
  if (args.length === 1 && (first === "--version" || first === "-V")) {
    process.stdout.write(`mail-account-service ${serviceVersion} (Node.js ${nodeVersion})\n`);
    return true;
  }
  if (args.length === 1 && (first === "--help" || first === "-h")) {
    process.stdout.write(helpText());
    return true;
  }
  process.stderr.write(
    `error: unknown argument ${JSON.stringify(args.join(" "))}; the service takes only --help or --version (configuration comes from the environment)\n`,
  );
  process.exitCode = 2;
  return true;
}
