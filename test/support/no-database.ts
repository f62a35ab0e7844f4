// The real app (createEdda: routes, auth, validation, problems) over a
// database that is not there: every use of it is recorded and throws. For the
// unit tier's route tests — a refusal the app decides before storage is
// answered without the database, and `touched` proves it (so a refused request
// cannot have written anything). Not a storage double: it implements nothing,
// so there is no behaviour of Postgres here to drift from.
import { createEdda, type Edda, type EddaOptions } from "../../src/edda.ts";
import type { Database, Db } from "../../src/storage/database.ts";

export interface NoDatabase {
  database: Database;
  /** What was asked of the database, in order (`db.execute`, `db.transaction`, `listen` …). */
  touched: string[];
}

export class NoDatabaseError extends Error {
  override name = "NoDatabaseError";
}

export function noDatabase(): NoDatabase {
  const touched: string[] = [];
  const refuse = (what: string): never => {
    touched.push(what);
    throw new NoDatabaseError(`the unit tier has no database (asked for ${what})`);
  };
  const db = new Proxy(Object.create(null) as object, {
    get(_target, prop) {
      // Not a thenable, not a primitive: only a property read that is a use of the database counts.
      if (prop === "then" || typeof prop === "symbol") return undefined;
      return (..._args: unknown[]) => refuse(`db.${prop}`);
    },
  }) as Db;
  const database: Database = {
    driver: "postgres-js",
    db,
    stats: { statements: 0 },
    concurrent: true,
    listen: async () => refuse("listen"),
    close: async () => undefined,
  };
  return { database, touched };
}

export interface AppWithoutDatabase {
  edda: Edda;
  touched: string[];
  /** `app.request` with a JSON body. */
  request(path: string, init?: RequestInit): Promise<Response>;
}

/** createEdda over `noDatabase()`; `opts` as for createEdda (workflows required). */
export function appWithoutDatabase(opts: Omit<EddaOptions, "database">): AppWithoutDatabase {
  const { database, touched } = noDatabase();
  const edda = createEdda({ ...opts, database });
  return { edda, touched, request: (path, init) => Promise.resolve(edda.app.request(path, init)) };
}
