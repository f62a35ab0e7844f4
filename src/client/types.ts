/**
 * Type-level plumbing of the client: which names a set of workflows has, and
 * the input/output types of each, taken from the definitions (type-only: the
 * client bundle contains none of the server's code).
 */
import type { Workflow } from "../core/definitions.ts";

type AnyWorkflow = Workflow<any, any, string, any>;

/** What `createClient<typeof workflows>` accepts: an array (or tuple) of workflows, or an object of them. */
export type WorkflowSet = readonly AnyWorkflow[] | Readonly<Record<string, AnyWorkflow>>;

type Members<W> = W extends readonly (infer X)[] ? X : W extends Readonly<Record<string, infer X>> ? X : never;

/** The workflow names of a set (literal types when the definitions give them). */
export type WorkflowName<W extends WorkflowSet> = Members<W>["workflowName"];

type ByName<W extends WorkflowSet, N> = Extract<Members<W>, { workflowName: N }>;

/** What `start(name, input)` must be given: the input schema's input type. */
export type StartInput<W extends WorkflowSet, N extends WorkflowName<W>> =
  ByName<W, N> extends Workflow<any, any, any, infer In> ? In : unknown;

/** What the workflow returns, as it arrives over JSON. */
export type WorkflowResult<W extends WorkflowSet, N extends WorkflowName<W>> =
  ByName<W, N> extends Workflow<any, infer O, any, any> ? Jsonified<Awaited<O>> : unknown;

/**
 * A value after a JSON round trip: dates become ISO strings, functions and
 * `undefined` members disappear. `unknown`/`any` stay as they are.
 */
export type Jsonified<T> = unknown extends T
  ? T
  : T extends Date
    ? string
    : T extends string | number | boolean | null
      ? T
      : T extends undefined | ((...args: any[]) => unknown) | symbol
        ? never
        : T extends readonly (infer E)[]
          ? Jsonified<E>[]
          : T extends object
            ? JsonObject<T>
            : T;

type Dropped = ((...args: any[]) => unknown) | symbol;
/** Members that may be undefined may be absent after JSON; functions are dropped. */
type JsonObject<T> = Simplify<
  { [K in keyof T as T[K] extends Dropped ? never : undefined extends T[K] ? never : K]: Jsonified<T[K]> } & {
    [K in keyof T as T[K] extends Dropped ? never : undefined extends T[K] ? K : never]?: Jsonified<Exclude<T[K], undefined>>;
  }
>;
type Simplify<T> = { [K in keyof T]: T[K] } & {};
