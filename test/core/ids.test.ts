// Operation ids: user text is escaped so it never produces the reserved
// characters of internal ids (`#` attempt rows, `:` counters), the escaping is
// injective, and ids always fit the 255-character column.
import { readFileSync, readdirSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeIdPart, explicitId } from "../../src/core/ids.ts";

// Mostly the characters that matter, sometimes anything, sometimes long.
const idText = fc.string({ unit: fc.oneof(fc.constantFrom("#", ":", "%", "~", "2", "3", "a", "\u0000", "é", "🚀"), fc.string({ minLength: 1, maxLength: 1 })), maxLength: 140 });

describe("operation ids", () => {
  it("escapes %, #, :, ~ and control characters, and leaves ordinary names unchanged", () => {
    expect(encodeIdPart("orders#eu")).toBe("orders%23eu");
    expect(encodeIdPart("a:b")).toBe("a%3Ab");
    expect(encodeIdPart("50%")).toBe("50%25");
    expect(encodeIdPart("ünïcødé 🚀")).toBe("ünïcødé 🚀");
    expect(encodeIdPart("payment.completed")).toBe("payment.completed");
    expect(() => explicitId("")).toThrow(TypeError);
  });

  it("never yields '#' or ':' and is injective (property)", () => {
    let cases = 0;
    fc.assert(
      fc.property(idText, idText, (a, b) => {
        cases++;
        const ea = encodeIdPart(a);
        return !/[#:]/.test(ea) && `receive_${ea}:1`.length <= 255 && (a === b || ea !== encodeIdPart(b)) && encodeIdPart(`${a}#`) !== encodeIdPart(`${a}%23`);
      }),
      { numRuns: 500 },
    );
    console.log(`ids property: ${cases} cases`);
  });

  it("the storage layer imports only the leaf modules of core (model.ts, errors.ts)", () => {
    const dir = new URL("../../src/storage/", import.meta.url);
    const files = readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts"));
    const coreImports = files.flatMap((f) => [...readFileSync(new URL(f, dir), "utf8").matchAll(/from "(?:\.\.\/)+core\/([^"]+)"/g)].map((m) => m[1]));
    expect(new Set(coreImports)).toEqual(new Set(["model.ts", "errors.ts"]));
    for (const leaf of ["model.ts", "errors.ts"]) {
      expect(readFileSync(new URL(`../../src/core/${leaf}`, import.meta.url), "utf8")).not.toMatch(/^import /m);
    }
  });
});
