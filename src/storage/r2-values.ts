/**
 * Values by reference in a Cloudflare R2 bucket (a Worker's binding), for
 * deployments that keep large values out of Postgres: one object per value,
 * `{prefix}{instance id}/{ref}`. Not transactional with the step: a value is
 * written before the statement that references it, and one whose statement
 * did not commit is never referenced; the purge deletes an instance's
 * objects by prefix after it deleted the instance (`deleted`), so those go
 * too. The R2 types are declared here, as much as this module uses.
 */
import type { LargeValueStore } from "./payload-refs.ts";

/** The part of an R2 bucket binding this store uses. */
export interface R2BucketLike {
  put(key: string, value: string): Promise<unknown>;
  get(key: string): Promise<{ text(): Promise<string> } | null>;
  list(options: { prefix: string; cursor?: string; limit?: number }): Promise<{ objects: { key: string; size: number }[]; truncated: boolean; cursor?: string }>;
  delete(keys: string | string[]): Promise<void>;
}

async function objectsUnder(bucket: R2BucketLike, prefix: string): Promise<{ key: string; size: number }[]> {
  const objects: { key: string; size: number }[] = [];
  let cursor: string | undefined;
  do {
    const page = await bucket.list({ prefix, limit: 1000, ...(cursor ? { cursor } : {}) });
    objects.push(...page.objects);
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return objects;
}

const keysUnder = async (bucket: R2BucketLike, prefix: string): Promise<string[]> => (await objectsUnder(bucket, prefix)).map((o) => o.key);

/** A LargeValueStore over `bucket` (object keys start with `prefix`). */
export function r2Values(bucket: R2BucketLike, prefix = "edda-values/"): LargeValueStore {
  const key = (instanceId: string, ref: string) => `${prefix}${encodeURIComponent(instanceId)}/${ref}`;
  return {
    async put(_ex, rows) {
      await Promise.all(rows.map((r) => bucket.put(key(r.instanceId, r.ref), r.data)));
    },
    async get(_ex, instanceId, refs) {
      const found = new Map<string, string>();
      await Promise.all(
        refs.map(async (ref) => {
          const obj = await bucket.get(key(instanceId, ref));
          if (obj) found.set(ref, await obj.text());
        }),
      );
      return found;
    },
    async copy(_ex, from, to) {
      const source = key(from, "");
      for (const k of await keysUnder(bucket, source)) {
        const obj = await bucket.get(k);
        if (obj) await bucket.put(key(to, k.slice(source.length)), await obj.text());
      }
    },
    async bytes(_ex, instanceId) {
      return (await objectsUnder(bucket, key(instanceId, ""))).reduce((n, o) => n + o.size, 0);
    },
    async deleted(instanceIds) {
      for (const id of instanceIds) {
        const keys = await keysUnder(bucket, key(id, ""));
        // R2 deletes at most 1000 keys per call.
        for (let i = 0; i < keys.length; i += 1000) await bucket.delete(keys.slice(i, i + 1000));
      }
    },
  };
}
