import { createPgliteDatabase } from "../../src/storage/drivers/pglite.ts";
import { storageContract } from "./contract.ts";

// In-memory: one connection, so the concurrency cases are skipped (`concurrent` is false).
storageContract("pglite", () => createPgliteDatabase());
