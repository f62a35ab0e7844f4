// Which Host and Origin values the app counts as its own (http/guards.ts),
// pure: loopback names (localhost, 127.x.y.z, [::1]) with any port; a
// configured host without a port matches every port, one with a port only
// that port, case-insensitively; an Origin is its own only over http(s),
// matched against the configured hosts — or, with none configured, against
// the request's own Host — and "null" or garbage never. The doors built on
// them, through the app: open-mode.unit.test.ts, front-doors.test.ts.
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { hostMatches, isLoopbackHost, originAllowed } from "../../src/http/guards.ts";

describe("host rules", () => {
  it("loopback: localhost, 127.0.0.0/8 and [::1], with or without a port; nothing that only starts like one", () => {
    for (const h of ["localhost", "LOCALHOST:3000", "127.0.0.1", "127.8.9.10:8787", "[::1]", "[::1]:443"]) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ["localhost.evil.example", "127.0.0.1.evil.example", "128.0.0.1", "::1", "[::2]", "localhost:http", "0.0.0.0"]) expect(isLoopbackHost(h), h).toBe(false);
  });

  it("a configured host without a port matches any port; with a port, that port only", () => {
    const allowed = ["edda.example.com", "127.0.0.1:8787"];
    for (const h of ["edda.example.com", "EDDA.example.com:443", "edda.example.com:8080", "127.0.0.1:8787"]) expect(hostMatches(h, allowed), h).toBe(true);
    for (const h of ["evil.example.com", "sub.edda.example.com", "127.0.0.1:8788", "127.0.0.1", "edda.example.com.evil"]) expect(hostMatches(h, allowed), h).toBe(false);
  });

  it("an Origin is its own only over http(s): against the configured hosts, else against the request's Host", async () => {
    const app = new Hono();
    app.get("/", (c) =>
      c.json({
        configured: ["https://edda.example.com", "http://edda.example.com:8080", "https://evil.example", "null", "file:///x", "ftp://edda.example.com", "garbage"].map((o) => originAllowed(c, o, ["edda.example.com"])),
        own: ["http://localhost:8787", "http://localhost:9999", "https://localhost:8787"].map((o) => originAllowed(c, o, [])),
      }),
    );
    expect(await (await app.request("http://localhost:8787/")).json()).toEqual({ configured: [true, true, false, false, false, false, false], own: [true, false, true] });
  });
});
