/** @jsxImportSource hono/jsx */
/**
 * The start form, generated from a workflow's zod input schema through its
 * JSON Schema (`z.toJSONSchema`): one field per top-level property — text,
 * number, checkbox, select for enums, a JSON box for anything nested — plus a
 * raw-JSON box that overrides the fields. The browser's constraints are only a
 * convenience; the workflow's own schema decides, and its issues are shown
 * next to the values the user typed.
 */
import * as z from "zod";
import type { Workflow } from "../../core/definitions.ts";
import { Problem } from "./layout.tsx";

type Kind = "string" | "number" | "integer" | "boolean" | "enum" | "json";

export interface Field {
  name: string;
  kind: Kind;
  required: boolean;
  options?: string[];
  min?: number;
  max?: number;
  minLength?: number;
  maxLength?: number;
  description?: string;
}

export interface Issue {
  path?: PropertyKey[];
  message: string;
}

type JsonSchema = {
  type?: string | string[];
  enum?: unknown[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  description?: string;
};

/** Fields for a workflow's input, or null when the input is not a plain object (raw JSON only). */
export function inputFields(wf: Workflow): Field[] | null {
  const schema = wf.options.input;
  if (!schema) return null;
  let js: JsonSchema;
  try {
    js = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as JsonSchema;
  } catch {
    return null;
  }
  if (js.type !== "object" || !js.properties) return null;
  const required = new Set(js.required ?? []);
  return Object.entries(js.properties).map(([name, p]) => {
    const f: Field = { name, kind: kindOf(p), required: required.has(name) };
    if (f.kind === "enum") f.options = (p.enum ?? []).map(String);
    const min = p.minimum ?? p.exclusiveMinimum;
    const max = p.maximum ?? p.exclusiveMaximum;
    if (typeof min === "number" && Number.isSafeInteger(Math.trunc(min))) f.min = min;
    if (typeof max === "number" && Number.isSafeInteger(Math.trunc(max))) f.max = max;
    if (typeof p.minLength === "number") f.minLength = p.minLength;
    if (typeof p.maxLength === "number") f.maxLength = p.maxLength;
    if (p.description) f.description = p.description;
    return f;
  });
}

function kindOf(p: JsonSchema): Kind {
  if (Array.isArray(p.enum) && p.enum.every((v) => typeof v === "string")) return "enum";
  if (p.type === "string" || p.type === "number" || p.type === "integer" || p.type === "boolean") return p.type;
  return "json";
}

/**
 * The input from submitted form values: the raw JSON box when filled, else
 * the fields converted by kind (blank optional fields are left out).
 */
export function readInput(fields: Field[] | null, form: Record<string, string>): { input: unknown } | { issues: Issue[] } {
  const rawJson = (form.__json ?? "").trim();
  if (rawJson !== "" || fields === null) {
    if (rawJson === "") return { input: undefined };
    try {
      return { input: JSON.parse(rawJson) };
    } catch {
      return { issues: [{ message: "the input is not valid JSON" }] };
    }
  }
  const input: Record<string, unknown> = {};
  const issues: Issue[] = [];
  for (const f of fields) {
    const v = form[`in.${f.name}`] ?? "";
    if (f.kind === "boolean") {
      input[f.name] = v === "on" || v === "true";
      continue;
    }
    if (v.trim() === "" && f.kind !== "string") {
      if (f.required) issues.push({ path: [f.name], message: "required" });
      continue;
    }
    if (v === "" && !f.required) continue;
    if (f.kind === "number" || f.kind === "integer") {
      const n = Number(v);
      input[f.name] = Number.isFinite(n) ? n : v; // the schema reports a non-number
    } else if (f.kind === "json") {
      try {
        input[f.name] = JSON.parse(v);
      } catch {
        issues.push({ path: [f.name], message: "not valid JSON" });
      }
    } else input[f.name] = v;
  }
  return issues.length ? { issues } : { input };
}

export interface StartFormProps {
  workflow: string;
  fields: Field[] | null;
  values: Record<string, string>;
  problem?: { message: string; issues?: Issue[] | undefined } | undefined;
}

function FieldInput({ f, value }: { f: Field; value: string }) {
  const name = `in.${f.name}`;
  const id = `f-${f.name}`;
  if (f.kind === "boolean") {
    return (
      <label class="check">
        <input type="checkbox" id={id} name={name} checked={value === "on"} /> {f.name}
      </label>
    );
  }
  // One element: labels stack their children in a column.
  const label = (
    <span>
      {f.name}
      {f.required ? " *" : ""} <span class="muted">({f.kind === "json" ? "JSON" : f.kind})</span>
      {f.description ? <span class="muted"> — {f.description}</span> : null}
    </span>
  );
  if (f.kind === "enum") {
    return (
      <label for={id}>
        {label}
        <select id={id} name={name} required={f.required}>
          {f.required ? null : <option value="">— none —</option>}
          {(f.options ?? []).map((o) => (
            <option value={o} selected={o === value}>
              {o}
            </option>
          ))}
        </select>
      </label>
    );
  }
  if (f.kind === "json") {
    return (
      <label for={id}>
        {label}
        <textarea id={id} name={name} rows={3}>
          {value}
        </textarea>
      </label>
    );
  }
  const numeric = f.kind === "number" || f.kind === "integer";
  return (
    <label for={id}>
      {label}
      <input
        id={id}
        name={name}
        type={numeric ? "number" : "text"}
        step={numeric ? (f.kind === "integer" ? "1" : "any") : undefined}
        min={numeric && f.min !== undefined ? String(f.min) : undefined}
        max={numeric && f.max !== undefined ? String(f.max) : undefined}
        minlength={f.minLength}
        maxlength={f.maxLength}
        required={f.required}
        value={value}
      />
    </label>
  );
}

export function StartForm(p: StartFormProps) {
  return (
    <form method="post" action={`/ui/workflows/${encodeURIComponent(p.workflow)}/start`} class="card form-grid" id="start-form">
      {p.problem ? <Problem message={p.problem.message} issues={p.problem.issues} /> : null}
      {p.fields?.map((f) => <FieldInput f={f} value={p.values[`in.${f.name}`] ?? ""} />)}
      {p.fields ? (
        <details>
          <summary class="small">Input as JSON (overrides the fields)</summary>
          <textarea name="__json" rows={4}>
            {p.values.__json ?? ""}
          </textarea>
        </details>
      ) : (
        <label>
          input (JSON)
          <textarea name="__json" rows={6}>
            {p.values.__json ?? ""}
          </textarea>
        </label>
      )}
      <label>
        instance id (optional; the same id again returns the existing instance)
        <input name="instanceId" maxlength={200} pattern="[A-Za-z0-9_.:\-]{1,200}" value={p.values.instanceId ?? ""} />
      </label>
      <div>
        <button type="submit">Start {p.workflow}</button>
      </div>
    </form>
  );
}
