/**
 * Groups: named sets of instances (`joinGroup` in a workflow), read by
 * `groupMembers` to address them. A finished instance leaves its groups in its
 * conclusion (leases.ts), a purged one with its row.
 */
import { and, asc, eq } from "drizzle-orm";
import type { Executor } from "./database.ts";
import { workflowGroupMemberships } from "./schema.ts";

/** Group membership of instances. */
export interface GroupsArea {
  joinGroup(instanceId: string, group: string): Promise<void>;
  leaveGroup(instanceId: string, group: string): Promise<void>;
  groupMembers(group: string): Promise<string[]>;
}

export function groupsArea(ex: Executor): GroupsArea {
  return {
    async joinGroup(instanceId, group) {
      await ex.insert(workflowGroupMemberships).values({ instanceId, groupName: group }).onConflictDoNothing();
    },

    async leaveGroup(instanceId, group) {
      await ex
        .delete(workflowGroupMemberships)
        .where(and(eq(workflowGroupMemberships.instanceId, instanceId), eq(workflowGroupMemberships.groupName, group)));
    },

    async groupMembers(group) {
      const rows = await ex
        .select({ instanceId: workflowGroupMemberships.instanceId })
        .from(workflowGroupMemberships)
        .where(eq(workflowGroupMemberships.groupName, group))
        .orderBy(asc(workflowGroupMemberships.id));
      return rows.map((r) => r.instanceId);
    },
  };
}
