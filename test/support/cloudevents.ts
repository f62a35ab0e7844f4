// Posting CloudEvents to an app in each HTTP binding mode (structured, binary,
// batch), and the shape of a refusal: 400, InvalidCloudEvent, not retryable,
// naming the attribute (and in a batch the member's index).
import { expect } from "vitest";

export interface EventPoster {
  structured(body: unknown): Promise<Response>;
  batch(body: unknown): Promise<Response>;
  send(contentType: string, body: string | Uint8Array, headers?: Record<string, string>): Promise<Response>;
  binary(ce: Record<string, string>, body?: string | Uint8Array, contentType?: string): Promise<Response>;
}

export function eventPoster(request: (path: string, init: RequestInit) => Promise<Response> | Response, token: string): EventPoster {
  const send = (contentType: string, body: string | Uint8Array, headers: Record<string, string> = {}) =>
    Promise.resolve(request("/events", { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": contentType, ...headers }, body: body as BodyInit }));
  return {
    send,
    structured: (body) => send("application/cloudevents+json", JSON.stringify(body)),
    batch: (body) => send("application/cloudevents-batch+json", JSON.stringify(body)),
    binary(ce, body = "", contentType) {
      const headers: Record<string, string> = { authorization: `Bearer ${token}` };
      for (const [k, v] of Object.entries(ce)) headers[`ce-${k}`] = v;
      if (contentType !== undefined) headers["content-type"] = contentType;
      return Promise.resolve(request("/events", { method: "POST", headers, body: body as BodyInit }));
    },
  };
}

let seq = 0;
export const uid = (p: string) => `${p}-${++seq}`;
/** The four required attributes, a fresh id each time. */
export const baseEvent = () => ({ specversion: "1.0", id: uid("ev"), source: "/mycontext", type: "table.event" });
export const long = (n: number) => "x".repeat(n);

type Problem = { error: string; error_type: string; retryable: boolean; attribute?: string; index?: number };

/** A 400 InvalidCloudEvent refusal naming `attribute` (and `index` in a batch). */
export async function expectInvalidEvent(res: Response | Promise<Response>, attribute: string | undefined, index?: number): Promise<void> {
  const r = await res;
  const body = (await r.json()) as Problem;
  expect(r.status, JSON.stringify(body)).toBe(400);
  expect(body).toMatchObject({ error_type: "InvalidCloudEvent", retryable: false });
  expect(body.error).toBeTypeOf("string");
  if (attribute !== undefined) expect(body.attribute).toBe(attribute);
  if (index !== undefined) expect(body.index).toBe(index);
}
