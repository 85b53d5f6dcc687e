import type { FastifyInstance } from "fastify";

type Release = (error: null, payload: unknown) => void;

/** Responses held at most: the ninth of a turn writes the eight before it. */
export const maxHeldResponses = 8;

/**
 * Responses are written in groups: each is held until the end of the event-loop turn that produced
 * it (`setImmediate`, after the turn's I/O callbacks) or until `maxHeldResponses` are waiting,
 * instead of one by one as each handler ends.
 *
 * Why: on SQLite a lookup is answered within the I/O callback that read its request, so under load
 * the writes of one turn were spread between the handling of the others. Each write to a socket
 * wakes the client's reader, and a wake-up that finds it asleep is costly (an inter-processor
 * interrupt; on a virtual machine, a trip through the hypervisor). Written together, one wake-up
 * serves the group. The bound keeps the first responses of a long turn from waiting for all the
 * others: with no bound the median fell but the slowest responses did not (README, Performance).
 */
export function writeResponsesInGroups(app: FastifyInstance): void {
  let releases: Release[] = [];
  let payloads: unknown[] = [];
  let turnEndScheduled = false;
  const releaseAll = () => {
    const [held, heldPayloads] = [releases, payloads];
    releases = [];
    payloads = [];
    for (let i = 0; i < held.length; i++) (held[i] as Release)(null, heldPayloads[i]);
  };
  const atTurnEnd = () => {
    turnEndScheduled = false;
    releaseAll();
  };
  app.addHook("onSend", (_request, _reply, payload, done) => {
    releases.push(done as Release);
    payloads.push(payload);
    if (releases.length >= maxHeldResponses) releaseAll();
    else if (!turnEndScheduled) {
      turnEndScheduled = true;
      setImmediate(atTurnEnd);
    }
  });
}
