// The kit's cases under vitest: on in-memory PGlite (the default), and the
// same cases on real Postgres through `database: url`.
import { describe, it } from "vitest";
import { freshDatabase } from "../support/db.ts";
import { kitCases } from "./kit-cases.ts";

describe("edda-edge/testing on PGlite", () => {
  for (const c of kitCases()) it(c.name, { timeout: 120_000 }, c.run);
});

describe("edda-edge/testing on Postgres", () => {
  for (const c of kitCases(() => freshDatabase("kit"))) it(c.name, { timeout: 120_000 }, c.run);
});
