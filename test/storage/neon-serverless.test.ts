import { createNeonDatabase } from "../../src/storage/drivers/neon-serverless.ts";
import { useLocalNeonProxy } from "../support/db.ts";
import { fileDatabase, storageContract } from "./contract.ts";

const url = fileDatabase("storage_neon");
storageContract("neon-serverless", async () => (useLocalNeonProxy(), createNeonDatabase({ url: await url() })));
