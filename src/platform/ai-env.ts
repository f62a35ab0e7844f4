/**
 * The AI endpoint the agent example talks to, from the environment:
 * EDDA_AI_BASE_URL (an OpenAI-compatible Chat Completions endpoint, e.g.
 * `https://api.openai.com/v1` or a local server's `/v1`), EDDA_AI_MODEL (the
 * model id), EDDA_AI_API_KEY (optional: a local server may take none).
 * Like env.ts, the one place these are read; unset → undefined (no model
 * configured), set but empty → undefined too, so "configured" means a URL and
 * a model are both named.
 */
export interface AiModelSettings {
  baseUrl: string;
  model: string;
  apiKey: string | undefined;
}

/** The process's environment where there is one (Node, Deno's `process`, Workers with nodejs_compat); else none. */
function processEnv(): Record<string, unknown> {
  return (globalThis as { process?: { env?: Record<string, unknown> } }).process?.env ?? {};
}

const text = (v: unknown): string | undefined => (typeof v === "string" && v.trim() !== "" ? v.trim() : undefined);

export function aiModelSettings(env: Record<string, unknown> = processEnv()): AiModelSettings | undefined {
  const baseUrl = text(env.EDDA_AI_BASE_URL);
  const model = text(env.EDDA_AI_MODEL);
  if (!baseUrl || !model) return undefined;
  return { baseUrl, model, apiKey: text(env.EDDA_AI_API_KEY) };
}
