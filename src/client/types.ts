/**
 * Type-level plumbing of the client: which names a set of workflows has, and
 * the input/output types of each, taken from the definitions (type-only: the
 * client bundle contains none of the server's code).
 */
import type { Workflow } from "../core/definitions.ts";

/** Any workflow definition, whatever its types. */
export type AnyWorkflow = Workflow<any, any, string, any>;

/** What `createClient<typeof workflows>` accepts: an array (or tuple) of workflows, or an object of them. */
export type WorkflowSet = readonly AnyWorkflow[] | Readonly<Record<string, AnyWorkflow>>;

/** The workflows of a set, as a union. */
export type Members<W> = W extends readonly (infer X)[] ? X : W extends Readonly<Record<string, infer X>> ? X : never;

/** The workflow names of a set (literal types when the definitions give them). */
export type WorkflowName<W extends WorkflowSet> = Members<W>["workflowName"];

/** The workflow of a set with the name `N`. */
export type ByName<W extends WorkflowSet, N> = Extract<Members<W>, { workflowName: N }>;

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

/**
 * An object after a JSON round trip: members that may be undefined may be
 * absent; functions and symbols are dropped. (The trailing `infer` flattens
 * the two halves into one object type for readable hovers.)
 */
export type JsonObject<T> = ({
  [K in keyof T as T[K] extends ((...args: any[]) => unknown) | symbol ? never : undefined extends T[K] ? never : K]: Jsonified<T[K]>;
} & {
  [K in keyof T as T[K] extends ((...args: any[]) => unknown) | symbol ? never : undefined extends T[K] ? K : never]?: Jsonified<Exclude<T[K], undefined>>;
}) extends infer O
  ? { [K in keyof O]: O[K] }
  : never;
