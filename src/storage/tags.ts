/**
 * Tags of instances (core/tags.ts): one row per (instance, key), indexed by
 * (key, value) so a filter on tags is an index probe per tag. Written with
 * the instance at its start (instances.ts createInstance, same statement)
 * and by `setTags` inside a step's transaction; deleted with the instance.
 */
import { sql } from "drizzle-orm";
import { MAX_TAGS, type Tags } from "../core/model.ts";
import { ValidationError } from "../core/errors.ts";
import { queryRows, type Executor } from "./database.ts";

export interface TagsArea {
  /**
   * Set these keys (others are kept). More than MAX_TAGS keys in all is a
   * ValidationError and changes nothing (the check is part of the statement).
   */
  setInstanceTags(instanceId: string, tags: Tags): Promise<void>;
  getInstanceTags(instanceId: string): Promise<Tags>;
}

export function tagsArea(ex: Executor): TagsArea {
  return {
    async setInstanceTags(instanceId, tags) {
      if (Object.keys(tags).length === 0) return;
      const [row] = await queryRows<{ total: number; written: number }>(
        ex,
        sql`WITH t AS (SELECT key, value FROM json_each_text(${JSON.stringify(tags)}::json)),
                 total AS (SELECT count(*)::int AS n FROM (SELECT key FROM workflow_instance_tags WHERE instance_id = ${instanceId} UNION SELECT key FROM t) k),
                 up AS (
                   INSERT INTO workflow_instance_tags (instance_id, key, value)
                   SELECT ${instanceId}, key, value FROM t WHERE (SELECT n FROM total) <= ${MAX_TAGS}
                   ON CONFLICT (instance_id, key) DO UPDATE SET value = excluded.value
                   RETURNING 1)
            SELECT (SELECT n FROM total) AS total, (SELECT count(*)::int FROM up) AS written`,
      );
      if (row && Number(row.total) > MAX_TAGS) {
        throw new ValidationError(`an instance has at most ${MAX_TAGS} tags; these would make ${row.total}`, [{ path: ["tags"], message: `at most ${MAX_TAGS} tags` }]);
      }
    },
    async getInstanceTags(instanceId) {
      const rows = await queryRows<{ key: string; value: string }>(ex, sql`SELECT key, value FROM workflow_instance_tags WHERE instance_id = ${instanceId} ORDER BY key`);
      return Object.fromEntries(rows.map((r) => [r.key, r.value]));
    },
  };
}
