// The client address behind trusted proxies (src/http/client-address.ts):
// X-Forwarded-For is believed only from a proxy the operator named, and then
// only up to the first hop that is not itself trusted (a client can prepend
// anything it likes). A bad EDDA_TRUSTED_PROXIES is a configuration error,
// never a silent "trust nobody" or "trust everybody".
import { describe, expect, it } from "vitest";
import { parseIp, TrustedProxies } from "../../src/http/client-address.ts";
import { ConfigurationError, readConfig } from "../../src/platform/env.ts";

describe("trusted proxies", () => {
  const t = TrustedProxies.parse(["10.0.0.0/8", "::1", "fd00::/8"]);

  it("parses IPv4, IPv6, bracketed and IPv4-mapped addresses; refuses the rest", () => {
    expect(parseIp("::ffff:10.1.2.3")).toEqual(parseIp("10.1.2.3"));
    expect(parseIp("[::1]")).toEqual(parseIp("0:0:0:0:0:0:0:1"));
    for (const bad of ["1.2.3", "256.1.1.1", "1:2:3:4:5:6:7:8:9", "::1::", "example.com", ""]) expect(parseIp(bad)).toBeNull();
  });

  it("matches CIDR ranges of either family", () => {
    expect(t.trusts("10.200.3.4")).toBe(true);
    expect(t.trusts("::ffff:10.200.3.4")).toBe(true);
    expect(t.trusts("11.0.0.1")).toBe(false);
    expect(t.trusts("fd12::5")).toBe(true);
    expect(t.trusts("fe80::1")).toBe(false);
    expect(TrustedProxies.parse(["loopback"]).trusts("127.8.9.10")).toBe(true);
    expect(TrustedProxies.parse(["private"]).trusts("192.168.1.1")).toBe(true);
  });

  it("takes the right-most untrusted hop, and only from a trusted peer", () => {
    expect(t.clientOf("10.0.0.1", "1.2.3.4, 10.0.0.5")).toBe("1.2.3.4");
    expect(t.clientOf("10.0.0.1", "6.6.6.6, 1.2.3.4")).toBe("1.2.3.4"); // the left hop is the client's own writing
    expect(t.clientOf("9.9.9.9", "1.2.3.4")).toBe("9.9.9.9"); // not a trusted peer: the header is ignored
    expect(t.clientOf("10.0.0.1", "garbage, 5.6.7.8")).toBe("5.6.7.8");
    expect(t.clientOf("10.0.0.1", "garbage")).toBe("10.0.0.1");
    expect(TrustedProxies.none.clientOf("10.0.0.1", "1.2.3.4")).toBe("10.0.0.1");
  });

  it("EDDA_TRUSTED_PROXIES: a list of addresses and ranges; a bad entry is a ConfigurationError naming it", () => {
    expect(readConfig({ EDDA_TRUSTED_PROXIES: "10.0.0.0/8, ::1" }).trustedProxies).toEqual(["10.0.0.0/8", "::1"]);
    expect(readConfig({}).trustedProxies).toEqual([]);
    expect(() => readConfig({ EDDA_TRUSTED_PROXIES: "10.0.0.0/33" })).toThrow(ConfigurationError);
    expect(() => readConfig({ EDDA_TRUSTED_PROXIES: "proxy.internal" })).toThrow(/proxy\.internal/);
    expect(readConfig({ EDDA_MAX_STREAMS: "12", EDDA_BODY_TIMEOUT_SECONDS: "5" })).toMatchObject({ maxOpenStreams: 12, bodyTimeoutSeconds: 5 });
  });
});
