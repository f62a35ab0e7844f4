/**
 * `GET /openapi.json` (the document, behind the API token like the rest of the
 * API: it names every workflow and its input schema) and `GET /docs`, a
 * self-contained reference page that loads the document and sends requests
 * from the browser. The page pulls nothing from a CDN: it works offline and
 * under a strict CSP for scripts from elsewhere.
 */
import type { Hono } from "hono";
import * as z from "zod";
import type { Workflow } from "../core/definitions.ts";
import { DOCS_PAGE } from "./docs-page.ts";
import { documented, openApiDocument } from "./openapi.ts";

export interface ReferenceOptions {
  workflows: () => Iterable<Workflow>;
  tokenRequired: () => boolean;
}

export function referenceRoutes(app: Hono, api: Hono, opts: ReferenceOptions): void {
  let cached: { tokenRequired: boolean; text: string } | null = null;
  api.get(
    "/openapi.json",
    documented({
      operationId: "openapi",
      summary: "This OpenAPI 3.1 document",
      tags: ["reference"],
      auth: "api",
      responses: { 200: { description: "the document", schema: z.record(z.string(), z.unknown()) } },
    }),
    (c) => {
      // Routes and workflows are fixed once the app is built: the document is built once.
      const tokenRequired = opts.tokenRequired();
      if (cached?.tokenRequired !== tokenRequired) {
        const doc = openApiDocument(app, { title: "Edda Edge API", version: "1.0.0", workflows: opts.workflows(), tokenRequired });
        cached = { tokenRequired, text: JSON.stringify(doc) };
      }
      return c.body(cached.text, 200, { "content-type": "application/json; charset=utf-8" });
    },
  );
  app.get("/docs", (c) =>
    c.html(DOCS_PAGE, 200, {
      // No framing: the page holds a token typed into it, so no other site may overlay it (clickjacking).
      "content-security-policy": "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
      "x-frame-options": "DENY",
      "x-content-type-options": "nosniff",
      "referrer-policy": "same-origin",
    }),
  );
}
