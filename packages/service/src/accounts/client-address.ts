import { isIP } from "node:net";
import { refusal } from "../errors.ts";

/**
 * Whether a door's client address (`X-Client-Address`, the web's peer) is an IP address; anything
 * else is refused at the door, so rotating junk values cannot buy fresh counters.
 */
export const isClientAddress = (value: string): boolean => isIP(value) !== 0;

/** A door was told a client address that is not an IP address (`X-Client-Address`). */
export const clientAddressInvalid = refusal(
  "client_address.invalid",
  "bad_request",
  () => "X-Client-Address: must be an IP address",
);

/**
 * The group a client address is counted in: an IPv4 address on its own, an IPv6 address by its /64
 * (one subscriber usually holds a whole /64, so counting single IPv6 addresses would hand an attacker
 * 2^64 fresh counters). IPv4 written as IPv6 (`::ffff:192.0.2.1`) counts as the IPv4 address.
 * Returns null for anything that is not an IP address.
 */
export function clientGroup(value: string): string | null {
  const address = value.trim();
  const version = isIP(address);
  if (version === 4) return address;
  if (version !== 6) return null;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped && isIP(mapped[1]!) === 4) return mapped[1]!;
  const groups = expandIpv6(address.split("%")[0]!);
  return `${groups.slice(0, 4).join(":")}::/64`;
}

/** The eight 16-bit groups of an IPv6 address, lower-case, without leading zeros. */
function expandIpv6(address: string): string[] {
  let text = address.toLowerCase();
  // A trailing dotted IPv4 part becomes two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split(".").map(Number) as [number, number, number, number];
    text = `${text.slice(0, -dotted[1]!.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const front = head ? head.split(":") : [];
  const back = tail ? tail.split(":") : [];
  const missing = tail === undefined ? 0 : 8 - front.length - back.length;
  const groups = [...front, ...Array<string>(missing).fill("0"), ...back];
  return groups.map((group) => Number.parseInt(group || "0", 16).toString(16));
}
