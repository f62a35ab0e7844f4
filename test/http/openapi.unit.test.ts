// The OpenAPI document: valid OpenAPI 3.1, every route of the app in it (or
// on the documented exclusion list), each workflow's input schema in it, and
// the schemas in it are the ones that validate requests. Unit tier: the app is
// built on a database factory that refuses, and no route here opens one (the
// token check: openapi-auth.unit.test.ts).
import SwaggerParser from "@apidevtools/swagger-parser";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workflows } from "../../functions/workflows/index.ts";
import { documented, endpointsOf, openApiDocument, UNDOCUMENTED_ROUTES, undocumentedEndpoints } from "../../src/http/openapi.ts";
import { createEdda, type Edda, type EddaOptions } from "../../src/edda.ts";
import { mcp } from "../../src/mcp.ts";

const TOKEN = "openapi-token";
let t: { edda: Edda };
type Doc = { openapi: string; paths: Record<string, Record<string, any>>; components: Record<string, any> };
let doc: Doc;

const auth = { authorization: `Bearer ${TOKEN}` };

/** An app whose database may never be opened: the document and /docs need none. */
const withoutDatabase = (opts: Omit<EddaOptions, "database" | "secret">) =>
  createEdda({
    secret: "test-secret",
    ...opts,
    database: () => {
      throw new Error("the OpenAPI document must not need the database");
    },
  });

beforeAll(async () => {
  t = { edda: withoutDatabase({ workflows, apiToken: TOKEN, mcp: mcp() }) };
  const r = await t.edda.app.request("/openapi.json", { headers: auth });
  expect(r.status).toBe(200);
  doc = (await r.json()) as Doc;
});
afterAll(async () => {
  await t.edda.close();
});

describe("/openapi.json", () => {
  it("is a valid OpenAPI 3.1 document", async () => {
    expect(doc.openapi).toBe("3.1.0");
    // The validator dereferences in place: give it a copy.
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeTruthy();
  });

  it("has every route of the app, except the documented exclusions", () => {
    const endpoints = endpointsOf(t.edda.app);
    expect(endpoints.length).toBeGreaterThanOrEqual(10);
    expect(undocumentedEndpoints(t.edda.app, doc)).toEqual([]);
    // Every exclusion says why.
    for (const e of UNDOCUMENTED_ROUTES) expect(e.reason.length).toBeGreaterThan(10);
  });

  it("reports a route added without a spec, and documents one added with its schemas", async () => {
    const extra = withoutDatabase({
      workflows,
      routes: (api) => {
        api.get("/undescribed", (c) => c.text("x"));
        api.get(
          "/things/:id",
          documented({
            operationId: "getThing",
            summary: "a thing",
            tags: ["test"],
            auth: "api",
            params: z.object({ id: z.string() }),
            query: z.object({ size: z.coerce.number().int().max(3) }),
            responses: { 200: { description: "the thing", schema: z.object({ id: z.string(), size: z.number() }) } },
          }),
          (c) => c.json({ id: c.var.valid.params.id, size: c.var.valid.query.size }),
        );
      },
    });
    try {
      const d = (await (await extra.app.request("/openapi.json")).json()) as Doc;
      expect(undocumentedEndpoints(extra.app, d)).toEqual(["GET /undescribed"]);
      const op = d.paths["/things/{id}"]!.get;
      expect(op.operationId).toBe("getThing");
      expect(op.parameters.find((p: { name: string }) => p.name === "size")).toMatchObject({ in: "query", required: true, schema: { type: "integer", maximum: 3 } });
      // The documented schema is the one that validates.
      expect((await extra.app.request("/things/a?size=2")).status).toBe(200);
      const bad = await extra.app.request("/things/a?size=9");
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ error_type: "BadRequest" });
      await expect(SwaggerParser.validate(structuredClone(d) as never)).resolves.toBeTruthy();
    } finally {
      await extra.close();
    }
  });

  it("documents each workflow's input schema on its own start path", () => {
    for (const wf of workflows) {
      const op = doc.paths[`/workflows/${wf.workflowName}/instances`]?.post;
      expect(op, wf.workflowName).toBeDefined();
      const body = op.requestBody.content["application/json"].schema;
      if (wf.options.input) {
        const { $schema: _, ...expected } = z.toJSONSchema(wf.options.input, { target: "draft-2020-12", io: "input", unrepresentable: "any" });
        expect(body.properties.input).toEqual(expected);
      }
    }
    const pipeline = doc.paths["/workflows/pipeline/instances"]!.post;
    expect(pipeline.requestBody.content["application/json"].schema.properties.input).toMatchObject({
      type: "object",
      properties: { steps: { type: "integer", minimum: 0, maximum: 10_000 } },
      required: ["steps"],
    });
    expect(pipeline.security).toEqual([{ bearer: [] }]);
  });

  it("describes the internal routes with the signature scheme and /healthz with none", () => {
    expect(doc.paths["/_edda/step"]!.post.security).toEqual([{ signature: [] }]);
    expect(doc.paths["/healthz"]!.get.security).toEqual([]);
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" });
  });

});

describe("/docs", () => {
  it("is a self-contained page (no script or style from another origin) that loads the document", async () => {
    const r = await t.edda.app.request("/docs");
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("text/html");
    const html = await r.text();
    expect(html).toContain('fetch("openapi.json"');
    expect(html).not.toMatch(/<(script|link)[^>]+(src|href)=["']?(https?:)?\/\//i);
    expect(r.headers.get("content-security-policy")).toContain("connect-src 'self'");
  });

  it("may not be framed by another site (it holds a typed-in token)", async () => {
    const r = await t.edda.app.request("/docs");
    expect(r.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(r.headers.get("x-frame-options")).toBe("DENY");
  });
});

it("is the same document whatever the app was asked first (built once per app)", () => {
  const again = openApiDocument(t.edda.app, { title: "Edda Edge API", version: "1.0.0", workflows, tokenRequired: true });
  expect(again).toEqual(doc);
});
