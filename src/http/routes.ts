/**
 * What every route module receives from the app: the request's engine, its
 * dispatch scope, and the body/query parser. A leaf module (it imports no other
 * route module), so the route files depend on it and the app depends on them,
 * with no import circle through `app.ts`.
 */
import type { Context, Hono } from "hono";
import type { Workflow } from "../core/definitions.ts";
import type { z } from "zod";
import { ValidationError } from "../core/errors.ts";
import type { DispatchScope } from "../engine/dispatcher.ts";
import type { Engine } from "../engine/engine.ts";
import type { StreamGate } from "./stream-gate.ts";

export interface RouteHelpers {
  engine: (c: Context) => Promise<Engine>;
  scope: (c: Context) => DispatchScope | undefined;
  parse: <T extends z.ZodType>(schema: T, value: unknown, what: string) => z.output<T>;
  /** The configured Host values (guards.ts), for routes that check a browser's Origin. */
  hosts?: () => readonly string[];
  /** The cap on open event streams (stream.ts), shared by the API's and the viewer's. */
  streams?: StreamGate;
}

/**
 * An optional part of the app that lives outside the core (MCP: `mcp()` from
 * `edda-edge/mcp`; the viewer: `viewer()` from `edda-edge/viewer`). The app
 * only calls it, never imports it, so a bundle that does not pass one does
 * not carry its code or its dependencies. Opaque to users: what it does is
 * kept in a WeakMap, not typed into the public object.
 */
export interface ApiSurface {
  readonly name: string;
}

/** What a surface mounted beside the API gets besides the route helpers: the credentials it checks itself. */
export interface SurfaceHelpers extends RouteHelpers {
  apiTokens: () => string[] | undefined;
  secret: () => string | undefined;
  /** The client's address for throttling failed credentials (the app's trusted proxies applied: guards.ts). */
  clientKey: (c: Context) => string | undefined;
}

interface SurfaceParts {
  /** Refuses, when the app is built, a configuration that cannot work with these workflows. */
  check(workflows: readonly Workflow[]): void;
  /**
   * Where it is mounted: on the public API, behind its bearer token (MCP), or
   * on the app beside the API, authenticating its own requests (the viewer's login).
   */
  place: "api" | "app";
  mount(target: Hono, helpers: SurfaceHelpers): void;
}

const surfaces = new WeakMap<ApiSurface, SurfaceParts>();

export function defineSurface(name: string, parts: SurfaceParts): ApiSurface {
  const surface = Object.freeze({ name });
  surfaces.set(surface, parts);
  return surface;
}

/** The parts of a surface made by `defineSurface`; a TypeError naming how to make one otherwise. */
export function surfaceParts(surface: ApiSurface, option: string, hint: string): SurfaceParts {
  const parts = typeof surface === "object" && surface !== null ? surfaces.get(surface) : undefined;
  if (!parts) throw new TypeError(`${option}: ${hint}`);
  return parts;
}

export function parse<T extends z.ZodType>(schema: T, value: unknown, what: string): z.output<T> {
  const r = schema.safeParse(value);
  if (!r.success) throw new ValidationError(`${what} is invalid`, r.error.issues);
  return r.data;
}
