/**
 * How many Argon2 derivations this process has started (a hash made, a hash verified, a secret box's
 * key derived): what the sign-in tests count to show that a right and a wrong password cost the same
 * work, and what the benchmark reports per sign-in. A count, not a time: it does not depend on the
 * machine's load.
 */
let derivations = 0;

export function countDerivation(): void {
  derivations++;
}

export const derivationsSoFar = (): number => derivations;
