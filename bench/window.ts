/** What a closed-loop measurement window saw: the answers counted in it and the time it covered. */
export interface WindowResult<T> {
  seconds: number;
  /** Each counted answer with its latency in ms, in the order they came. */
  answers: { value: T; ms: number }[];
  /** Attempts that threw (counted whenever they ended). */
  errors: number;
}

/**
 * `concurrency` loops, each starting its next attempt when the last one ends, until `seconds` have
 * passed; attempts still running then are awaited (so the target is idle afterwards) but not
 * counted. With `seconds` 0, each loop makes exactly one attempt, and all are counted.
 *
 * A window in which nothing ended (a short smoke run on a slow host: a queued Argon2 sign-in can
 * take longer than the window) stays open until the first answer or error, for a minute at most,
 * so every run measures at least one attempt; the figures then cover that longer time.
 */
export async function measureWindow<T>(
  seconds: number,
  concurrency: number,
  attempt: () => Promise<T>,
): Promise<WindowResult<T>> {
  const answers: { value: T; ms: number }[] = [];
  let errors = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const giveUp = deadline + 60_000;
  const once = seconds === 0;
  const open = () => {
    const now = performance.now();
    return now <= deadline || (answers.length + errors === 0 && now < giveUp);
  };
  let lastCounted = started;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      do {
        const t = performance.now();
        try {
          const value = await attempt();
          if (once || open()) {
            lastCounted = performance.now();
            answers.push({ value, ms: lastCounted - t });
          }
        } catch {
          errors++;
        }
      } while (!once && open());
    }),
  );
  const end = once ? performance.now() : Math.max(Math.min(performance.now(), deadline), lastCounted);
  return { seconds: (end - started) / 1000, answers, errors };
}
