/**
 * The example agents (docs/agents.md), apart from `workflows` so that only
 * an entry that serves them bundles the AI SDK: the Node entry does; the
 * Worker and Deno entries do not.
 */
import { supportAgent } from "./support-agent.ts";

export const agentWorkflows = [supportAgent];
