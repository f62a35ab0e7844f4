/**
 * `edda-edge/viewer`: the HTML viewer at `/ui` as the `viewer` option
 * (`viewer: viewer()`). Its own entry, so a Worker without it does not bundle
 * its pages; `serveNode` and the Deno adapter turn it on by themselves.
 */
export { viewer } from "./http/ui/surface.ts";
