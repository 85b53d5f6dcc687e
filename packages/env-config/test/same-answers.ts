/**
 * The rule every program reads its environment by, as one check that the service's, the janitor's
 * and the Postfix adapter's configuration tests each run on their own loadConfig: a variable that
 * is empty or only blanks gets the answer of a missing one (its default, or the error of a missing
 * required variable), and a bad value is an error naming the variable.
 */
import assert from "node:assert/strict";

type Env = Record<string, string | undefined>;
type Answer = { config: unknown } | { error: string };

function answer(load: (env: Env) => unknown, env: Env): Answer {
  try {
    return { config: load(env) };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * `base` sets what the program needs to start; `badValues` names every variable it reads, each with
 * a value it refuses (null where every value is taken, such as a secret).
 */
export function assertEmptyIsMissing(
  load: (env: Env) => unknown,
  base: Env,
  badValues: Record<string, string | null>,
): void {
  for (const [name, bad] of Object.entries(badValues)) {
    const missing = answer(load, { ...base, [name]: undefined });
    for (const empty of ["", "  ", "\t"]) {
      assert.deepEqual(answer(load, { ...base, [name]: empty }), missing, `${name}=${JSON.stringify(empty)}`);
    }
    if (bad === null) continue;
    const refused = answer(load, { ...base, [name]: bad });
    assert.ok("error" in refused, `${name}=${JSON.stringify(bad)} is refused`);
    assert.match(refused.error, new RegExp(`^${name}: `), name);
  }
}
