/**
 * `viewer()`: the viewer as an optional surface of the app, like `mcp()`. The
 * core app never imports the pages, so a Worker that does not pass
 * `viewer: viewer()` bundles none of them (a bundler cannot drop a route
 * mounted at run time, and wrangler inlines dynamic imports). `serveNode` and
 * the Deno adapter pass it unless told `viewer: false`.
 */
import { defineSurface, type ApiSurface } from "../routes.ts";
import { viewer as viewerPages } from "./index.tsx";

/** The viewer at /ui, for the `viewer` option of `createEdda` / `createWorker` (`serveNode` and the Deno adapter pass it themselves). */
export function viewer(): ApiSurface {
  return defineSurface("viewer", {
    check: () => undefined,
    place: "app",
    mount: (app, h) => {
      app.route("/ui", viewerPages({ engine: h.engine, scope: h.scope, tokens: h.apiTokens, secret: h.secret, ...(h.hosts ? { hosts: h.hosts } : {}), clientKey: h.clientKey, ...(h.streams ? { streams: h.streams } : {}) }));
    },
  });
}
