// CloudEvents batches (application/cloudevents-batch+json): one invalid
// member refuses the whole batch with its index, before any member is stored
// (the valid members before it included), and a batch over MAX_BATCH_EVENTS is
// refused outright. No database is asked for. Moved from cloudevents.test.ts,
// which keeps accepted batches (and 100 events accepted) on PGlite;
// cloudevents-batch.test.ts keeps the one-transaction faults and races.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { waitEvent, workflow } from "../../src/index.ts";
import { appWithoutDatabase } from "../support/no-database.ts";
import { MAX_BATCH_EVENTS } from "../../src/core/cloudevent.ts";
import { baseEvent, eventPoster, expectInvalidEvent, long } from "../support/cloudevents.ts";

const TOKEN = "ce-token";
const waiter = workflow("ce_waiter", async (ctx) => (await waitEvent(ctx, "table.valid")).data);
const handler = workflow("ce_handler", { eventHandler: "table.handled", input: z.object({ n: z.number() }) }, async (_ctx, input) => input);
const t = appWithoutDatabase({ workflows: [waiter, handler], apiToken: TOKEN });
const { batch } = eventPoster(t.request, TOKEN);
// Refused before the ingestion's transaction: nothing was asked of the database, so nothing was stored.
afterEach(() => expect(t.touched).toEqual([]));
afterAll(() => t.edda.close());

describe("batch mode (application/cloudevents-batch+json): refusals", () => {
  it(`${MAX_BATCH_EVENTS} + 1 events are a 400`, async () => {
    await expectInvalidEvent(batch(Array.from({ length: MAX_BATCH_EVENTS + 1 }, baseEvent)), undefined);
  });

  const invalid: [string, () => unknown, string | undefined, number | undefined][] = [
    ["a member without id (the valid member before it is not stored)", () => [baseEvent(), { ...baseEvent(), id: undefined }], "id", 1],
    ["mixed spec versions", () => [baseEvent(), { ...baseEvent(), specversion: "0.3" }], "specversion", 1],
    ["a member that is not an object", () => [baseEvent(), "event"], undefined, 1],
    ["an invalid first member", () => [{ ...baseEvent(), time: "lunchtime" }, baseEvent()], "time", 0],
    ["a member with both data and data_base64", () => [baseEvent(), baseEvent(), { ...baseEvent(), data: 1, data_base64: "AA==" }], "data_base64", 2],
    ["a member whose type is over 255 characters", () => [baseEvent(), { ...baseEvent(), type: long(300) }], "type", 1],
    ["a member with data the event handler refuses", () => [baseEvent(), { ...baseEvent(), type: "table.handled", data: { n: "one" } }], "data", 1],
    ["an object instead of an array", () => baseEvent(), undefined, undefined],
  ];
  it.each(invalid)("400: %s", async (_name, make, attribute, index) => {
    await expectInvalidEvent(batch(make()), attribute, index);
  });
});
