/**
 * Postfix's socketmap lookup protocol (socketmap_table(5)): each request is one netstring
 * `<map> <key>`, each answer one netstring `OK <data>`, `NOTFOUND `, `TEMP <reason>` or
 * `PERM <reason>`. Postfix keeps a connection open for many requests, one at a time; requests a
 * client sends ahead are answered in order.
 *
 * Maps: `domain` (virtual_mailbox_domains), `mailbox` (virtual_mailbox_maps), `alias`
 * (virtual_alias_maps; destinations comma-separated) and `senders` (smtpd_sender_login_maps;
 * logins comma-separated). The service unreachable, slow, or answering 5xx gives TEMP, so Postfix
 * defers the mail; never NOTFOUND, which would bounce it.
 */
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type { CounterSeries, HistogramSeries, Metrics } from "./metrics.ts";
import { encodeNetstring, NetstringDecoder, NetstringError } from "./netstring.ts";
import { type ServiceClient, ServiceUnavailable } from "./service-client.ts";
import { Listener } from "./tcp.ts";

/** Longest request: map name, space and key. Postfix's keys are addresses (at most a few hundred bytes). */
export const MAX_REQUEST_BYTES = 10_000;
/** Postfix refuses longer answers (socketmap_max_reply_size, 100000 by default). */
const MAX_REPLY_BYTES = 100_000;
/** Reading pauses while this much sent-ahead input waits to be answered. */
const MAX_PENDING_BYTES = 256 * 1024;

export const MAPS = ["domain", "mailbox", "alias", "senders"] as const;
type MapName = (typeof MAPS)[number];

export interface SocketmapOptions {
  client: ServiceClient;
  logger: Logger;
  metrics: Metrics;
  maxConnections?: number;
  idleTimeoutMs?: number;
}

/** The answer to one request (without the netstring framing). */
function lookup(client: ServiceClient, map: MapName, key: string): Promise<string> {
  switch (map) {
    case "domain":
      return client.domain(key).then(found);
    case "mailbox":
      return client.mailbox(key).then(found);
    case "alias":
      return client.alias(key).then(joined);
    case "senders":
      return client.senders(key).then(joined);
  }
}

const found = (exists: boolean | null) => (exists ? "OK 1" : "NOTFOUND ");
const joined = (list: string[] | null) => (list && list.length > 0 ? `OK ${list.join(",")}` : "NOTFOUND ");

/** Each map's metric series, found once: every lookup updates two of them. */
interface MapSeries {
  duration: HistogramSeries;
  ok: CounterSeries;
  notfound: CounterSeries;
  temp: CounterSeries;
  perm: CounterSeries;
}

function mapSeries(metrics: Metrics, map: string): MapSeries {
  const result = (name: string) => metrics.socketmapLookups.series({ map, result: name });
  return {
    duration: metrics.socketmapDuration.series({ map }),
    ok: result("ok"),
    notfound: result("notfound"),
    temp: result("temp"),
    perm: result("perm"),
  };
}

export function createSocketmapListener(options: SocketmapOptions): Listener {
  const { client, logger, metrics } = options;
  const seriesByMap = new Map<string, MapSeries>(MAPS.map((map) => [map, mapSeries(metrics, map)]));
  // Asked once: even a disabled pino level costs a call and its argument on every lookup.
  const debug = logger.isLevelEnabled("debug");

  const answer = async (request: Buffer): Promise<string> => {
    const text = request.toString("utf8");
    const space = text.indexOf(" ");
    if (space <= 0) {
      metrics.socketmapLookups.inc({ map: "invalid", result: "perm" });
      return "PERM malformed request (expected: <map> <key>)";
    }
    const map = text.slice(0, space);
    const key = text.slice(space + 1);
    const series = seriesByMap.get(map);
    if (!series) {
      metrics.socketmapLookups.inc({ map: "unknown", result: "perm" });
      return `PERM unknown map (use ${MAPS.join(", ")})`;
    }
    const started = performance.now();
    let reply: string;
    let result: CounterSeries;
    try {
      reply = await lookup(client, map as MapName, key);
      result = reply.charCodeAt(0) === 0x4f /* O */ ? series.ok : series.notfound;
      // UTF-8 takes at most 3 bytes per UTF-16 unit: short answers need no counting.
      if (reply.length > MAX_REPLY_BYTES / 3 && Buffer.byteLength(reply) > MAX_REPLY_BYTES) {
        logger.error({ map, key, bytes: Buffer.byteLength(reply) }, "socketmap answer too long for Postfix");
        reply = "PERM answer longer than Postfix accepts";
        result = series.perm;
      }
    } catch (error) {
      if (!(error instanceof ServiceUnavailable)) {
        logger.error(
          { map, key, err: error instanceof Error ? error.message : String(error) },
          "lookup failed",
        );
      }
      reply = "TEMP account service unavailable";
      result = series.temp;
    }
    result.value += 1;
    series.duration.observe((performance.now() - started) / 1000);
    if (debug) logger.debug({ map, key, reply }, "socketmap lookup");
    return reply;
  };

  return new Listener({
    name: "socketmap",
    metrics,
    logger,
    maxConnections: options.maxConnections ?? 1000,
    idleTimeoutMs: options.idleTimeoutMs ?? 600_000,
    open(socket: Socket) {
      const decoder = new NetstringDecoder(MAX_REQUEST_BYTES);
      const session = { busy: false };
      let closed = false;
      socket.on("close", () => {
        closed = true;
      });

      // Answers the requests received so far, one after the other, in order.
      const pump = async () => {
        if (session.busy) return;
        session.busy = true;
        try {
          while (!closed) {
            let request: Buffer | null;
            try {
              request = decoder.next();
            } catch (error) {
              if (!(error instanceof NetstringError)) throw error;
              metrics.protocolErrors.inc({ listener: "socketmap", kind: error.kind });
              logger.warn(
                { listener: "socketmap", remote: socket.remoteAddress, err: error.message },
                "bad input: closing the connection",
              );
              // Framing is lost: nothing after this can be read reliably.
              socket.end(encodeNetstring(`PERM ${error.message}`), () => socket.destroy());
              closed = true;
              return;
            }
            if (request === null) break;
            const reply = await answer(request);
            if (closed) return;
            socket.write(encodeNetstring(reply));
          }
        } finally {
          session.busy = false;
          if (!closed && socket.isPaused() && decoder.pending < MAX_PENDING_BYTES) socket.resume();
        }
      };

      socket.on("data", (chunk: Buffer) => {
        decoder.feed(chunk);
        if (decoder.pending >= MAX_PENDING_BYTES) socket.pause();
        void pump();
      });
      return session;
    },
  });
}
