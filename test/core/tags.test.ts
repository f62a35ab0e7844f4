// Tags (core/tags.ts), pure: what a start's or setTags' tags may be — at most
// MAX_TAGS pairs, keys of 1–64 characters of A-Z a-z 0-9 _ . -, string values
// of at most 256 characters without NUL — a ValidationError naming each
// offending tag otherwise; and the list filter `key:value` (split at the first
// colon, at most MAX_TAGS), whose refusals are InvalidArgumentErrors (a 400).
// The stored tags and the filters over HTTP: test/tags/*.test.ts on Postgres.
import { describe, expect, it } from "vitest";
import { InvalidArgumentError, ValidationError } from "../../src/core/errors.ts";
import { checkTags, MAX_TAG_KEY, MAX_TAG_VALUE, MAX_TAGS, parseTagFilters } from "../../src/core/tags.ts";

const thrown = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error("did not throw");
};

describe("tags", () => {
  it("accepts the bounds exactly and returns the tags as given", () => {
    const full = Object.fromEntries(Array.from({ length: MAX_TAGS }, (_, i) => [`k.${i}_-`, "v"]));
    expect(checkTags(full, "tags")).toEqual(full);
    expect(checkTags({ ["k".repeat(MAX_TAG_KEY)]: "v".repeat(MAX_TAG_VALUE), e: "" }, "tags")).toEqual({ ["k".repeat(MAX_TAG_KEY)]: "v".repeat(MAX_TAG_VALUE), e: "" });
  });

  it("refuses what an index entry cannot be, naming every offending tag under the given path", () => {
    const e = thrown(() => checkTags({ "bad key": "v", ok: 1, long: "v".repeat(MAX_TAG_VALUE + 1), nul: "a\u0000b", ["k".repeat(MAX_TAG_KEY + 1)]: "v" }, "setTags tags", ["args", "0"])) as ValidationError;
    expect(e).toBeInstanceOf(ValidationError);
    expect(e.message).toMatch(/^setTags tags are invalid: /);
    expect((e.issues as { path: string[] }[]).map((i) => i.path)).toEqual([["args", "0", "bad key"], ["args", "0", "ok"], ["args", "0", "long"], ["args", "0", "nul"], ["args", "0", "k".repeat(MAX_TAG_KEY + 1)]]);
    const many = thrown(() => checkTags(Object.fromEntries(Array.from({ length: MAX_TAGS + 1 }, (_, i) => [`k${i}`, "v"])), "tags")) as ValidationError;
    expect(many.issues).toEqual([{ path: ["tags"], message: `at most ${MAX_TAGS} tags, got ${MAX_TAGS + 1}` }]);
    for (const bad of [null, [], "k:v", 5]) expect(thrown(() => checkTags(bad, "tags"))).toBeInstanceOf(ValidationError);
  });

  it("filters are key:value split at the first colon; a malformed one or too many is an InvalidArgumentError on `tag`", () => {
    expect(parseTagFilters(["orderId:o-1", "url:https://x.example/a:b", "empty:"])).toEqual([["orderId", "o-1"], ["url", "https://x.example/a:b"], ["empty", ""]]);
    expect(parseTagFilters([])).toEqual([]);
    for (const texts of [["nocolon"], ["bad key:v"], [":v"], [`k:${"v".repeat(MAX_TAG_VALUE + 1)}`], Array.from({ length: MAX_TAGS + 1 }, (_, i) => `k${i}:v`)]) {
      const e = thrown(() => parseTagFilters(texts)) as InvalidArgumentError;
      expect(e, texts.join("&")).toBeInstanceOf(InvalidArgumentError);
      expect((e.issues as { path: string[] }[])[0]?.path[0]).toBe("tag");
    }
  });
});
