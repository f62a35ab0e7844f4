// The storage contract on postgres.js as a Worker opens it (`prepare: false`): unnamed statements whose
// values are written in as literals (src/storage/drivers/postgres-js-inline.ts), one flight each.
import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { fileDatabase, storageContract } from "./contract.ts";

const url = fileDatabase("storage_postgres_js_inline");
storageContract("postgres-js, values inlined", async () => createPostgresJsDatabase({ url: await url(), prepare: false }));
