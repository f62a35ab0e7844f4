/**
 * Who a request came from, for throttling failed credentials (guards.ts).
 *
 * The address is the platform's (Node's socket, Cloudflare's
 * cf-connecting-ip, which Cloudflare sets itself). `X-Forwarded-For` is read
 * only when the socket's peer is a proxy the operator named
 * (EDDA_TRUSTED_PROXIES: addresses or CIDR ranges, IPv4 or IPv6): then the
 * client is the right-most hop that is not itself a trusted proxy, since
 * every hop left of the last trusted one could have been written by the
 * client. Without trusted proxies the header is ignored: anyone can send it.
 */

/** A parsed address: its family and its value as a bigint (IPv4-mapped IPv6 counts as IPv4). */
interface Ip {
  v6: boolean;
  n: bigint;
}

function parseV4(s: string): bigint | null {
  const parts = s.split(".");
  if (parts.length !== 4) return null;
  let n = 0n;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null;
    n = (n << 8n) | BigInt(Number(p));
  }
  return n;
}

function parseV6(s: string): bigint | null {
  let text = s;
  let tail: bigint[] = [];
  const v4 = /:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text);
  if (v4) {
    const n = parseV4(v4[1]!);
    if (n === null) return null;
    tail = [n >> 16n, n & 0xffffn];
    text = text.slice(0, v4.index);
    if (text.endsWith(":")) text += ":"; // "::1.2.3.4": the "::" before the IPv4 part
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const group = (h: string) => (h === "" ? [] : h.split(":"));
  const head = group(halves[0]!);
  const rest = halves.length === 2 ? group(halves[1]!) : [];
  const want = 8 - tail.length;
  if (halves.length === 1 ? head.length !== want : head.length + rest.length >= want) return null;
  const groups = halves.length === 1 ? head : [...head, ...Array<string>(want - head.length - rest.length).fill("0"), ...rest];
  let n = 0n;
  for (const g of groups) {
    if (!/^[0-9a-f]{1,4}$/i.test(g)) return null;
    n = (n << 16n) | BigInt(parseInt(g, 16));
  }
  for (const t of tail) n = (n << 16n) | t;
  return n;
}

/** An address as the platform or a header gives it (`1.2.3.4`, `::1`, `[::1]`, `::ffff:1.2.3.4`, a zone id dropped), or null. */
export function parseIp(text: string): Ip | null {
  const s = text.trim().replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "");
  if (s.includes(":")) {
    const n = parseV6(s);
    if (n === null) return null;
    // IPv4-mapped (::ffff:a.b.c.d): the IPv4 address a dual-stack socket reports.
    if (n >> 32n === 0xffffn) return { v6: false, n: n & 0xffffffffn };
    return { v6: true, n };
  }
  const n = parseV4(s);
  return n === null ? null : { v6: false, n };
}

interface Range {
  v6: boolean;
  base: bigint;
  bits: number;
}

/** Which socket peers may tell the client's address (EDDA_TRUSTED_PROXIES), parsed once. */
export class TrustedProxies {
  private constructor(private readonly ranges: readonly Range[]) {}

  static readonly none = new TrustedProxies([]);

  /**
   * Addresses or CIDR ranges (`10.0.0.0/8`, `::1`, `fd00::/8`); `loopback`
   * and `private` name the usual ones. Throws a TypeError naming the first
   * entry that is neither.
   */
  static parse(entries: readonly string[]): TrustedProxies {
    const ranges: Range[] = [];
    for (const raw of entries) {
      const entry = raw.trim().toLowerCase();
      if (entry === "") continue;
      if (entry === "loopback") {
        ranges.push(...TrustedProxies.parse(["127.0.0.0/8", "::1"]).ranges);
        continue;
      }
      if (entry === "private") {
        ranges.push(...TrustedProxies.parse(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"]).ranges);
        continue;
      }
      const [addr, prefix, extra] = entry.split("/");
      const ip = addr === undefined ? null : parseIp(addr);
      const max = ip?.v6 ? 128 : 32;
      const bits = prefix === undefined ? max : /^\d{1,3}$/.test(prefix) ? Number(prefix) : NaN;
      if (!ip || extra !== undefined || !(bits >= 0 && bits <= max)) throw new TypeError(`not an IP address or CIDR range: "${raw.slice(0, 100)}"`);
      const shift = BigInt(max - bits);
      ranges.push({ v6: ip.v6, base: (ip.n >> shift) << shift, bits });
    }
    return new TrustedProxies(ranges);
  }

  get size(): number {
    return this.ranges.length;
  }

  trusts(address: string): boolean {
    const ip = parseIp(address);
    if (!ip) return false;
    return this.ranges.some((r) => {
      if (r.v6 !== ip.v6) return false;
      const shift = BigInt((r.v6 ? 128 : 32) - r.bits);
      return (ip.n >> shift) << shift === r.base;
    });
  }

  /**
   * The client's address: `peer` itself unless it is a trusted proxy; then
   * the right-most `X-Forwarded-For` hop that is not trusted (the left-most
   * when every hop is). A malformed hop ends the walk at the last good one.
   */
  clientOf(peer: string, forwardedFor: string | undefined): string {
    if (!forwardedFor || !this.trusts(peer)) return peer;
    let client = peer;
    const hops = forwardedFor.split(",").slice(-32).reverse();
    for (const hop of hops) {
      const h = hop.trim();
      if (!parseIp(h)) break;
      client = h;
      if (!this.trusts(h)) break;
    }
    return client;
  }
}
