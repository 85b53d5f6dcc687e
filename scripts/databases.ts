/**
 * A fresh database on a PostgreSQL or MariaDB server, and dropping it, from the shell: the same
 * code the tests and the benchmark use (packages/service/test/helpers/databases.ts).
 *
 *   node scripts/databases.ts create <server-url> [prefix]   prints the new database's URL
 *   node scripts/databases.ts drop <server-url> <name-or-url>
 *
 * The server URL names any database the user may connect to, e.g. postgres://postgres@127.0.0.1:5432/test
 * or mysql://root@127.0.0.1:3306/test.
 */
import { createDatabase, dropDatabase } from "../packages/service/test/helpers/databases.ts";

const [command, server, argument] = process.argv.slice(2);
const usage = "usage: databases.ts create <server-url> [prefix] | drop <server-url> <name-or-url>";
try {
  if (command === "create" && server) {
    process.stdout.write(`${(await createDatabase(server, argument ?? "mas_test")).url}\n`);
  } else if (command === "drop" && server && argument) {
    await dropDatabase(server, argument);
  } else {
    console.error(usage);
    process.exit(2);
  }
} catch (error) {
  console.error(`databases.ts ${command}: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
