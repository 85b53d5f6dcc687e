import { isIP } from "node:net";
import { refusal } from "../errors.ts";

/**
 * Whether a door's client address (`X-Client-Address`, the web's peer) is an IP address; anything
 * else is refused at the door, so rotating junk values cannot buy fresh counters.
 */
export const isClientAddress = (value: string): boolean => isIP(value.trim()) !== 0;

/** A door was told a client address that is not an IP address (`X-Client-Address`). */
export const clientAddressInvalid = refusal(
  "client_address.invalid",
  "bad_request",
  () => "X-Client-Address: must be an IP address",
);

/**
 * How wide a group of addresses counts as one client: a subscriber (an IPv4 address, an IPv6 /64:
 * one subscriber usually holds a whole /64, so single IPv6 addresses would hand an attacker 2^64
 * fresh counters) or, where no account's ceiling bounds the guessing (invite codes), a network
 * (IPv4 /24, IPv6 /48).
 */
export type GroupWidth = "subscriber" | "network";

/**
 * The group a client address is counted in. IPv4 written as IPv6 (`::ffff:192.0.2.1` in any
 * spelling, and the old `::192.0.2.1`) counts as the IPv4 address. Null for anything that is not an
 * IP address.
 */
export function clientGroup(value: string, width: GroupWidth = "subscriber"): string | null {
  const address = value.trim().split("%")[0]!;
  const version = isIP(address);
  if (version === 4) return ipv4Group(address, width);
  if (version !== 6) return null;
  const groups = expandIpv6(address);
  const embedsIpv4 =
    groups.slice(0, 5).every((group) => group === 0) &&
    (groups[5] === 0xffff || (groups[5] === 0 && groups[6] !== 0));
  if (embedsIpv4) {
    const high = groups[6]!;
    const low = groups[7]!;
    return ipv4Group(`${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`, width);
  }
  const prefix = groups.slice(0, width === "network" ? 3 : 4).map((group) => group.toString(16));
  return `${prefix.join(":")}::/${width === "network" ? 48 : 64}`;
}

const ipv4Group = (address: string, width: GroupWidth): string =>
  width === "network" ? `${address.split(".").slice(0, 3).join(".")}.0/24` : address;

/** The eight 16-bit groups of an IPv6 address (already checked by isIP). */
function expandIpv6(address: string): number[] {
  let text = address.toLowerCase();
  // A trailing dotted IPv4 part becomes two groups.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, -dotted[0].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const front = head ? head.split(":") : [];
  const back = tail ? tail.split(":") : [];
  const missing = tail === undefined ? 0 : 8 - front.length - back.length;
  return [...front, ...Array<string>(missing).fill("0"), ...back].map((group) =>
    Number.parseInt(group || "0", 16),
  );
}
