// What every CLI command shares (platform/cli/args.ts): strict option parsing
// (an unknown option or a missing value is a UsageError carrying the
// command's usage, exit 2), --help/-h printing the usage, JSON arguments
// where a bare word is a string but anything else must be JSON, and
// --database-url with --url as its deprecated alias. The commands as
// processes: test/cli/*.test.ts.
import { describe, expect, it } from "vitest";
import { databaseUrl, jsonArgument, parseCommand, UsageError } from "../../src/platform/cli/args.ts";

const io = () => {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, io: { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t) } };
};
const USAGE = "usage: edda-edge send <id> <channel> [data] [--url URL]";
const options = { url: { type: "string" }, json: { type: "boolean" } } as const;

describe("CLI arguments", () => {
  it("parses options and positionals; --help and -h print the usage", () => {
    const a = io();
    expect(parseCommand(["o-1", "approval", "--url", "http://x", "yes", "--json"], options, USAGE, a.io)).toEqual({ values: { url: "http://x", json: true }, positionals: ["o-1", "approval", "yes"], help: false });
    for (const flag of ["--help", "-h"]) {
      const b = io();
      expect(parseCommand([flag], options, USAGE, b.io).help).toBe(true);
      expect(b.out).toEqual([USAGE]);
    }
    expect(a.out).toEqual([]);
  });

  it("an unknown option or a missing value is a UsageError with the command's usage", () => {
    for (const argv of [["--nope"], ["--url"], ["--json=1"]]) {
      let caught: unknown;
      try {
        parseCommand(argv, options, USAGE, io().io);
      } catch (e) {
        caught = e;
      }
      expect(caught, argv.join(" ")).toBeInstanceOf(UsageError);
      expect((caught as UsageError).usage).toBe(USAGE);
    }
  });

  it("a bare word is a string, anything else JSON; a malformed object is refused, never sent as a string", () => {
    expect(jsonArgument(undefined)).toBeNull();
    for (const word of ["yes", "o-1", "user@example.com", "a:b/c.d", "ünïcødé"]) expect(jsonArgument(word)).toBe(word);
    expect(jsonArgument("true")).toBe(true);
    expect(jsonArgument("null")).toBeNull();
    expect(jsonArgument("42")).toBe(42);
    expect(jsonArgument('{"approved":true}')).toEqual({ approved: true });
    expect(jsonArgument('"quoted"')).toBe("quoted");
    for (const bad of ["{approved:true}", "two words", "1abc"]) expect(() => jsonArgument(bad), bad).toThrow(SyntaxError);
  });

  it("--database-url, else the deprecated --url with a warning, else the fallback", () => {
    const a = io();
    expect(databaseUrl({ "database-url": "postgres://a", url: "postgres://b" }, "postgres://env", a.io)).toBe("postgres://a");
    expect(a.err).toHaveLength(1);
    const b = io();
    expect(databaseUrl({ url: "postgres://b" }, "postgres://env", b.io)).toBe("postgres://b");
    expect(b.err[0]).toMatch(/--url is deprecated here.*--database-url/);
    const c = io();
    expect(databaseUrl({}, "postgres://env", c.io)).toBe("postgres://env");
    expect(databaseUrl({}, undefined, c.io)).toBeUndefined();
    expect(c.err).toEqual([]);
  });
});
