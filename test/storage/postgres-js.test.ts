import { createPostgresJsDatabase } from "../../src/storage/drivers/postgres-js.ts";
import { fileDatabase, storageContract } from "./contract.ts";

const url = fileDatabase("storage_postgres_js");
storageContract("postgres-js", async () => createPostgresJsDatabase({ url: await url() }));
