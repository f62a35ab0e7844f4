/**
 * What every route module receives from the app: the request's engine, its
 * dispatch scope, and the body/query parser. A leaf module (it imports no other
 * route module), so the route files depend on it and the app depends on them,
 * with no import circle through `app.ts`.
 */
import type { Context } from "hono";
import type { z } from "zod";
import { ValidationError } from "../core/errors.ts";
import type { DispatchScope } from "../engine/dispatcher.ts";
import type { Engine } from "../engine/engine.ts";

export interface RouteHelpers {
  engine: (c: Context) => Promise<Engine>;
  scope: (c: Context) => DispatchScope | undefined;
  parse: <T extends z.ZodType>(schema: T, value: unknown, what: string) => z.output<T>;
}

export function parse<T extends z.ZodType>(schema: T, value: unknown, what: string): z.output<T> {
  const r = schema.safeParse(value);
  if (!r.success) throw new ValidationError(`${what} is invalid`, r.error.issues);
  return r.data;
}
