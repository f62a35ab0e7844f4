// The typed client when there is no answer: a refused connection is an
// EddaConnectionError (an EddaClientError, with the URL it tried and the
// fetch error as its cause), never a bare TypeError; the caller's own abort
// stays an AbortError and sends nothing. No app, no database: the port is
// closed. (Moved from test/http/problems.test.ts; the client against a live
// app on Postgres: test/client/client.test.ts.)
import { describe, expect, it } from "vitest";
import { createClient, EddaClientError, EddaConnectionError } from "../../src/client/index.ts";
import { listen } from "../support/listen.ts";

describe("no answer", () => {
  it("a refused connection is an EddaConnectionError naming the URL; an aborted call stays an AbortError", async () => {
    const gone = await listen(() => new Response("never"));
    await gone.close(); // a port that refuses connections
    const down = createClient({ baseUrl: gone.url, token: "t" });
    const err = await down.list().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EddaConnectionError);
    expect(err).toBeInstanceOf(EddaClientError);
    expect((err as EddaConnectionError).url).toBe(`${gone.url}/instances`);
    expect((err as Error).message).toMatch(/ECONNREFUSED/);
    expect((err as Error).cause).toBeInstanceOf(TypeError);
    // The caller's own abort stays an AbortError, and nothing is sent.
    const sent: string[] = [];
    const ac = new AbortController();
    ac.abort();
    const client = createClient({ baseUrl: "http://edda.test", token: "t", fetch: async (url, init) => (init.signal?.throwIfAborted(), sent.push(url), new Response("{}")) });
    const aborted = await client.result("pd-none", { signal: ac.signal }).catch((e: unknown) => e);
    expect((aborted as Error).name).toBe("AbortError");
    expect(sent).toEqual([]);
  });
});
