// postinstall: guard postgres.js 3.4.x against writing to a socket that is
// already closed. Its connection.js defers small writes with setImmediate;
// when the connection closes first (the server terminated the backend or
// restarted), the deferred write runs on `socket = null` and throws a
// TypeError from a timer callback — uncatchable, it ends the process
// (upstream: porsager/postgres#1066, #1154, #1208, fix proposed in #1209).
// The chaos run (`npm run chaos`: pg_terminate_backend, pg_ctl restart)
// kills worker processes this way within seconds.
//
// The guard settles instead: the pending queries fail with CONNECTION_CLOSED
// (a catchable error the engine already handles) and the buffered bytes of
// the dead socket are dropped.
//
// Second defect, same trigger: a new connection fetches the array types with
// a promise nobody handles (`return fetchArrayTypes()`), so a connection
// terminated during that fetch is an unhandled rejection, which also ends a
// Node process. The patch catches it and fetches again on the next connect
// (the query that was waiting is retried by the reconnect, as upstream does).
//
// Idempotent; a postgres.js whose code differs is left alone with a warning
// (the guards are then no longer needed or must be redone).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const MARK = "/* edda-edge: nextWrite guard */";
const ORIGINAL = `  function nextWrite(fn) {
    const x = socket.write(chunk, fn)`;
const GUARDED = `  function nextWrite(fn) {
    ${MARK}
    if (!socket) {
      nextWriteTimer !== null && clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      return false
    }
    const x = socket.write(chunk, fn)`;
// closed()/terminate() clear the timer without forgetting it: a later write would never schedule again.
const CLEAR = "    clearImmediate(nextWriteTimer)\n";
const CLEAR_FORGET = "    clearImmediate(nextWriteTimer)\n    nextWriteTimer = null\n    chunk = null\n";

const TYPES = "        return fetchArrayTypes()\n";
const TYPES_CAUGHT = "        return fetchArrayTypes().catch(() => { needsTypes = options.fetch_types })\n";

let root;
try {
  // The package's exports hide package.json: resolve its entry and walk up to its folder.
  root = dirname(createRequire(import.meta.url).resolve("postgres"));
  while (!existsSync(join(root, "package.json")) || JSON.parse(readFileSync(join(root, "package.json"), "utf8")).name !== "postgres") {
    if (dirname(root) === root) process.exit(0);
    root = dirname(root);
  }
} catch {
  process.exit(0); // not installed (e.g. a production install without it)
}
for (const rel of ["src/connection.js", "cjs/src/connection.js", "cf/src/connection.js"]) {
  const file = join(root, rel);
  if (!existsSync(file)) continue;
  const src = readFileSync(file, "utf8");
  if (src.includes(MARK)) continue;
  if (!src.includes(ORIGINAL)) {
    console.warn(`patch-postgres: ${rel} has changed upstream; nextWrite guard not applied`);
    continue;
  }
  if (!src.includes(TYPES)) {
    console.warn(`patch-postgres: ${rel} has changed upstream; array-type fetch guard not applied`);
    continue;
  }
  writeFileSync(file, src.replace(ORIGINAL, GUARDED).replaceAll(CLEAR, CLEAR_FORGET).replace(TYPES, TYPES_CAUGHT));
}
