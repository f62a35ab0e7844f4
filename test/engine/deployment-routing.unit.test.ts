// Issue 38, item 3: the follow-up routing rules of the edge platforms, against what their documentation
// says (docs/design.md cites it): Workers' version overrides header is an RFC 8941 dictionary
// `<worker>="<version id>"`; a Deno Deploy revision has its own URL; a queue consumer on another
// version hands the step on (or leaves it to its deployment's sweep) rather than run it.
import { describe, expect, it } from "vitest";
import { denoDeploymentUrl, denoFollowUpBase, isWorkerVersionId, queueStepRoute, VERSION_OVERRIDES_HEADER, versionOverride, workersFollowUpHeaders } from "../../src/engine/deployment-routing.ts";

const V1 = "dc8dcd28-271b-4367-9840-6c244f84cb40";

describe("Workers version overrides", () => {
  it("is the documented header: worker name as the key, the version id as a quoted String", () => {
    expect(VERSION_OVERRIDES_HEADER).toBe("Cloudflare-Workers-Version-Overrides");
    // The docs' own example: my-worker-name="dc8dcd28-271b-4367-9840-6c244f84cb40".
    expect(versionOverride("my-worker-name", V1)).toBe(`my-worker-name="${V1}"`);
  });
  it("escapes a String's quote and backslash, and refuses what a structured field cannot carry", () => {
    expect(versionOverride("w", 'a"b\\c')).toBe('w="a\\"b\\\\c"');
    expect(() => versionOverride("My-Worker", V1)).toThrow(/structured-field key/);
    expect(() => versionOverride("9worker", V1)).toThrow(/structured-field key/);
    expect(() => versionOverride("w", "é")).toThrow(/printable ASCII/);
    expect(() => versionOverride("w", "a\nb")).toThrow(/printable ASCII/);
    expect(() => versionOverride("w", "")).toThrow(/required/);
  });
  it("a follow-up names the instance's version only when its deployment is a version id and the Worker's name is known", () => {
    expect(workersFollowUpHeaders("orders", V1, isWorkerVersionId)).toEqual({ "Cloudflare-Workers-Version-Overrides": `orders="${V1}"` });
    expect(workersFollowUpHeaders("orders", "release-7", isWorkerVersionId)).toEqual({});
    expect(workersFollowUpHeaders("orders", null, isWorkerVersionId)).toEqual({});
    expect(workersFollowUpHeaders(undefined, V1, isWorkerVersionId)).toEqual({});
  });
  it("a queue consumer runs what its deployment may run, hands an addressable version's step on, leaves the rest", () => {
    expect(queueStepRoute(true, "orders", V1)).toEqual({ kind: "run" });
    expect(queueStepRoute(false, "orders", V1)).toEqual({ kind: "hand_on", headers: { "Cloudflare-Workers-Version-Overrides": `orders="${V1}"` } });
    expect(queueStepRoute(false, "orders", "code:0123456789abcdef")).toEqual({ kind: "leave" });
    expect(queueStepRoute(false, undefined, V1)).toEqual({ kind: "leave" });
  });
});

describe("Deno Deploy revision URLs", () => {
  it("a revision's preview URL: <app>-<revision>.<org>.deno.net, and Classic's <project>-<deployment>.deno.dev", () => {
    expect(denoDeploymentUrl("shop", "k3x9p2", "acme").href).toBe("https://shop-k3x9p2.acme.deno.net/");
    expect(denoDeploymentUrl("shop", "k3x9p2").href).toBe("https://shop-k3x9p2.deno.dev/");
    expect(() => denoDeploymentUrl("shop", "k3x.9p2")).toThrow(/host label/);
    expect(() => denoDeploymentUrl("shop_", "k3x9p2")).toThrow(/host label/);
    expect(() => denoDeploymentUrl("a".repeat(60), "k3x9p2")).toThrow(/host label/);
  });
  it("a follow-up goes to the app's URL for this deployment's instances, to the revision's URL for another's", () => {
    const own = new URL("https://shop.acme.deno.net/");
    expect(denoFollowUpBase(own, "rev2", "rev2", "shop", "acme")).toBe(own);
    expect(denoFollowUpBase(own, "rev2", null, "shop", "acme")).toBe(own);
    expect(denoFollowUpBase(own, "rev2", "rev1", "shop", "acme").href).toBe("https://shop-rev1.acme.deno.net/");
    expect(denoFollowUpBase(own, "rev2", "rev1", undefined)).toBe(own);
  });
});
