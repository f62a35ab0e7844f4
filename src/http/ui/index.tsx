/** @jsxImportSource hono/jsx */
/**
 * The viewer at /ui: server-rendered pages over the same engine as the JSON
 * API, so it runs wherever the app runs (Node, Workers, Deno) with no build
 * step and no client bundle. Actions are plain HTML forms answered with a
 * redirect (post/redirect/get); a refused action re-renders its form with the
 * problem and the typed values. Security (login, CSRF, CSP): session.ts.
 */
import { Hono, type Context } from "hono";
import type { Child } from "hono/jsx";
import { ConflictError, InvalidArgumentError, NotFoundError, ValidationError } from "../../core/errors.ts";
import type { Engine } from "../../engine/engine.ts";
import type { DispatchScope } from "../../engine/dispatcher.ts";
import { discardDeadLetter, listDeadLetters, redeliverDeadLetter } from "../../engine/dead-letters.ts";
import { listAppSchedules } from "../../engine/schedules.ts";
import { DEAD_LETTER_STATUSES } from "../../engine/records.ts";
import { ChannelPage, ChannelsPage } from "./channels.tsx";
import { inputFields, readInput, StartForm } from "./forms.tsx";
import { InstancePage, TIMELINE_PAGE, type InstancePageProps } from "./instance.tsx";
import { formatSize, Oversized, PARSE_MAX_CHARS } from "./format.ts";
import { isDataException } from "../problem.ts";
import { clientKey, FailureThrottle } from "../guards.ts";
import { toView, type InstanceView } from "../../engine/views.ts";
import type { InstanceRecord } from "../../engine/records.ts";
import { Page, Problem } from "./layout.tsx";
import { filterOf, readListParams } from "./list-params.ts";
import { ListPage } from "./list.tsx";
import { OutboxPage } from "./outbox.tsx";
import { EVENTS_PAGE, EventsPage, eventsCursor, parseEventsCursor } from "./events.tsx";
import { historyExport } from "../history-export.ts";
import { lastEventId, streamResponse } from "../stream.ts";
import type { StreamGate } from "../stream-gate.ts";
import { SchedulesPage } from "./schedules.tsx";
import { bulkRoutes } from "./bulk.tsx";
import { authRequired, endSession, hasSession, matchToken, sameOriginOnly, securityHeaders, startSession, type SessionKeys, type SessionStore, type ViewerEnv } from "./session.ts";

export interface ViewerOptions extends SessionKeys {
  engine: (c: Context) => Promise<Engine>;
  scope: (c: Context) => DispatchScope | undefined;
  /** Who counts as the client for the login throttle (guards.ts; the app's trusted proxies). */
  clientKey?: (c: Context) => string | undefined;
  /** The app's cap on open event streams (stream.ts). */
  streams?: StreamGate;
}

type C = Context<ViewerEnv>;

const NOTICES: Record<string, string> = {
  started: "Workflow started.",
  cancelled: "Cancellation requested: compensations (if any) run, then the instance ends cancelled.",
  sent: "Message sent to the instance.",
  resumed: "Instance resumed: its failure count starts again from zero.",
  published: "Message published.",
  redelivered: "Event re-armed: the relay sends it again now (attempts start again from zero).",
  discarded: "Event discarded.",
  rerun: "Rerun started: a new instance of the same workflow with the same input (this one is unchanged).",
  paused: "Schedule paused: no sweep starts a tick of it until it is resumed.",
  "schedule-resumed": "Schedule resumed from its next tick after now (ticks missed while paused are not started).",
  triggered: "Scheduled workflow triggered: this instance was started now.",
  bulk: "Bulk operation created: it runs in batches, each instance once; this page follows its progress.",
  forked: "Fork started: the history before the fork point is reused, the rest runs with the deployed code.",
};

/** The notice a redirect asked for (own keys only: `?notice=__proto__` is no notice). */
const noticeOf = (c: Context): string | undefined => {
  const key = c.req.query("notice") ?? "";
  return Object.hasOwn(NOTICES, key) ? NOTICES[key] : undefined;
};

const MAX_JSON_CHARS = 256 * 1024;

/**
 * The instance as the page shows it: stored values longer than
 * PARSE_MAX_CHARS are not parsed (the page shows their size and links the
 * raw JSON), so the page costs the same whatever the instance holds.
 */
function boundedView(inst: InstanceRecord, e: Engine): InstanceView {
  const small = (text: string | null) => (text !== null && text.length > PARSE_MAX_CHARS ? null : text);
  const view = toView({ ...inst, inputData: small(inst.inputData) ?? "null", outputData: small(inst.outputData), errorData: small(inst.errorData), cancelData: small(inst.cancelData) }, e.errorView);
  const big = (text: string | null) => (text !== null && text.length > PARSE_MAX_CHARS ? new Oversized(text.length) : undefined);
  return {
    ...view,
    input: big(inst.inputData) ?? view.input,
    output: big(inst.outputData) ?? view.output,
    cancellation: big(inst.cancelData) ?? view.cancellation,
    error: big(inst.errorData) ? { error_type: "Error", error_message: `the stored error is ${formatSize(inst.errorData!.length)}, too large to show here: see the raw JSON` } : view.error,
  };
}

/** A stored JSON value as a download-free JSON response (the viewer's CSP and headers still apply). */
const rawJson = (text: string) => new Response(text, { headers: { "content-type": "application/json; charset=utf-8" } });

async function formValues(c: C): Promise<Record<string, string>> {
  const body = await c.req.parseBody();
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(body)) if (typeof v === "string") out[k] = v;
  return out;
}

/** JSON typed into a form; blank → null. */
function parseData(text: string | undefined): { ok: true; value: unknown } | { ok: false; message: string } {
  const t = (text ?? "").trim();
  if (t === "") return { ok: true, value: null };
  if (t.length > MAX_JSON_CHARS) return { ok: false, message: `data is longer than ${MAX_JSON_CHARS} characters` };
  try {
    return { ok: true, value: JSON.parse(t) };
  } catch {
    return { ok: false, message: 'data is not valid JSON (write text in quotes: "hello")' };
  }
}

export function viewer(opts: ViewerOptions): Hono<ViewerEnv> {
  const ui = new Hono<ViewerEnv>();
  const auth = () => authRequired(opts);

  const render = (c: C, title: string, body: Child, status = 200) => {
    const refresh = Number(c.req.query("refresh"));
    const meta = Number.isInteger(refresh) && refresh >= 2 && refresh <= 300 ? refresh : undefined;
    return c.html(
      <Page title={title} nonce={c.get("nonce")} auth={auth()} refresh={meta} fragment={c.req.header("x-edda-live") === "1"}>
        {body}
      </Page>,
      status as 200,
    );
  };
  const errorPage = (c: C, status: number, message: string, issues?: { path?: PropertyKey[]; message: string }[]) =>
    render(c, "Error", <Problem message={message} issues={issues} />, status);

  ui.use("*", securityHeaders());
  ui.use("*", sameOriginOnly(opts.hosts));
  ui.onError((err, c) => {
    if (err instanceof NotFoundError) return errorPage(c, 404, err.message);
    if (err instanceof ValidationError) return errorPage(c, 422, err.message, err.issues as never);
    if (err instanceof InvalidArgumentError) return errorPage(c, 400, err.message);
    if (err instanceof ConflictError) return errorPage(c, 409, err.message);
    // A value Postgres refuses (a NUL in an id from the URL): the client's input, as on the API.
    if (isDataException(err)) return errorPage(c, 400, "a value in the request is not acceptable");
    console.error("edda: viewer error", err);
    return errorPage(c, 500, "internal error");
  });

  // --- login ------------------------------------------------------------------
  const loginPage = (c: C, status = 200, problem?: string) =>
    c.html(
      <Page title="Log in" nonce={c.get("nonce")} auth={false} bare fragment={c.req.header("x-edda-live") === "1"}>
        <h1>Log in</h1>
        <form method="post" action="/ui/login" class="card form-grid" id="login-form">
          {problem ? <Problem message={problem} /> : null}
          <label>
            API token (EDDA_API_TOKEN)
            <input type="password" name="token" required autocomplete="current-password" autofocus />
          </label>
          <div>
            <button type="submit">Log in</button>
          </div>
        </form>
      </Page>,
      status as 200,
    );
  ui.get("/login", (c) => (auth() ? loginPage(c) : c.redirect("/ui", 303)));
  const logins = new FailureThrottle();
  ui.post("/login", async (c) => {
    if (!auth()) return c.redirect("/ui", 303);
    const token = (await formValues(c)).token ?? "";
    const matched = token ? await matchToken(opts, token) : null;
    if (!matched) {
      // Compared first: others' failed logins from the same address never refuse the right token.
      const wait = logins.fail((opts.clientKey ?? clientKey)(c));
      if (wait > 0) return loginPage(c, 429, `Too many failed attempts: try again in ${Math.ceil(wait / 1000)} s.`);
      return loginPage(c, 401, "That token is not valid.");
    }
    await startSession(c, opts, matched);
    return c.redirect("/ui", 303);
  });
  const sessions: SessionStore = {
    revoked: async (c, id) => (await opts.engine(c)).viewerSessionRevoked(id),
    revoke: async (c, id, expiresAt) => (await opts.engine(c)).revokeViewerSession(id, expiresAt),
  };
  ui.post("/logout", async (c) => {
    await endSession(c, opts, sessions);
    return c.redirect(auth() ? "/ui/login" : "/ui", 303);
  });
  ui.use("*", async (c, next) => {
    if (!auth() || (await hasSession(c, opts, sessions))) return next();
    if (c.req.method === "GET" || c.req.method === "HEAD") return c.redirect("/ui/login", 303);
    return loginPage(c, 401, "Log in first.");
  });

  // --- instances -----------------------------------------------------------------
  ui.get("/", async (c) => {
    const e = await opts.engine(c);
    const params = readListParams(c.req.query());
    const now = new Date();
    const filter = filterOf(params, now);
    let page;
    let problem: string | undefined;
    try {
      page = await e.listInstances({ ...filter, ...(params.status.length ? { status: params.status } : {}), ...(params.cursor ? { cursor: params.cursor } : {}), limit: 50 });
    } catch (err) {
      if (!(err instanceof InvalidArgumentError)) throw err;
      problem = "That page link is no longer valid; showing the newest instances.";
      params.cursor = "";
      page = await e.listInstances({ ...filter, ...(params.status.length ? { status: params.status } : {}), limit: 50 });
    }
    const counts = await e.countInstances(filter);
    const reasons = await e.reasonsOf(page.instances);
    const draining = (await e.deployments()).deployments.filter((d) => d.draining);
    return render(
      c,
      "Instances",
      <>
        {problem ? <Problem message={problem} /> : null}
        <ListPage params={params} workflows={[...e.workflows.keys()].sort()} counts={counts} instances={page.instances} nextCursor={page.nextCursor} now={now} why={reasons} draining={draining} />
      </>,
    );
  });

  const instancePage = async (c: C, id: string, extra: Partial<InstancePageProps> = {}, status = 200) => {
    const e = await opts.engine(c);
    const runParam = Number(c.req.query("run"));
    const afterParam = Number(c.req.query("after") ?? 0);
    const historyAfter = Number.isSafeInteger(afterParam) && afterParam > 0 ? afterParam : 0;
    const found = await e.instanceInspection(id, { historyAfter, run: runParam, limit: TIMELINE_PAGE, maxChars: PARSE_MAX_CHARS });
    if (!found) return errorPage(c, 404, `instance "${id}" not found`);
    const { inst, page, timers, subscriptions, webhooks, groups, compensations, runs, children, compensationEvents, archived } = found;
    const why = await e.reasonOf(inst);
    const notice = noticeOf(c);
    return render(
      c,
      id,
      <InstancePage
        view={{ ...boundedView(inst, e), children }}
        history={page.events}
        historyAfter={historyAfter}
        historyNext={page.nextAfterId}
        compensationEvents={compensationEvents}
        timers={timers}
        subscriptions={subscriptions}
        webhooks={webhooks}
        groups={groups}
        compensations={compensations}
        runs={runs}
        archived={archived}
        why={why}
        now={new Date()}
        notice={notice}
        {...extra}
      />,
      status,
    );
  };
  const instanceUrl = (id: string, notice: string) => `/ui/instances/${encodeURIComponent(id)}?notice=${notice}`;

  ui.get("/instances/:id", (c) => instancePage(c, c.req.param("id")));
  // The instance's live stream for the page's EventSource (the API's route wants a bearer token; this one the session).
  ui.get("/instances/:id/stream", async (c) => streamResponse(c, await opts.engine(c), c.req.param("id"), lastEventId(c) ?? 0, opts.scope(c), undefined, opts.streams));
  // All of a stored value, as the JSON it is stored as (the page shows a bounded part of it).
  ui.get("/instances/:id/raw/:part{input|output|error|cancellation}", async (c) => {
    const inst = await (await opts.engine(c)).instanceRecord(c.req.param("id"));
    if (!inst) return errorPage(c, 404, `instance "${c.req.param("id")}" not found`);
    const part = c.req.param("part");
    const text = part === "input" ? inst.inputData : part === "output" ? inst.outputData : part === "error" ? inst.errorData : inst.cancelData;
    return rawJson(text ?? "null");
  });
  ui.get("/instances/:id/raw/history/:eventId{[0-9]+}", async (c) => {
    const e = await opts.engine(c);
    const eventId = Number(c.req.param("eventId"));
    if (!Number.isSafeInteger(eventId)) return errorPage(c, 404, "no such history entry");
    const runParam = Number(c.req.query("run"));
    const run = Number.isSafeInteger(runParam) && c.req.query("run") !== undefined ? { run: runParam } : {};
    const [ev] = (await e.historyPreview(c.req.param("id"), { afterId: eventId - 1, limit: 1, maxChars: 2_147_483_647, ...run })).events;
    if (!ev || ev.id !== eventId || !ev.data) return errorPage(c, 404, "no such history entry");
    if (ev.data.type === "binary") return new Response(ev.data.bytes as Uint8Array<ArrayBuffer>, { headers: { "content-type": "application/octet-stream", "content-disposition": "attachment" } });
    return rawJson(ev.data.json);
  });
  /** A form action: redirect on success; a ConflictError re-renders the page it came from with the problem (409). */
  const action =
    <R,>(run: (c: C, e: Engine) => Promise<R>, done: (c: C, result: R) => string, refused: (c: C, message: string) => Promise<Response>) =>
    async (c: C) => {
      let result: R;
      try {
        result = await run(c, await opts.engine(c));
      } catch (err) {
        if (err instanceof ConflictError) return refused(c, err.message);
        throw err;
      }
      return c.redirect(done(c, result), 303);
    };
  const idOf = (c: C) => c.req.param("id") ?? "";
  const instanceRefused = (c: C, message: string) => instancePage(c, idOf(c), { problem: { message } }, 409);
  ui.post("/instances/:id/cancel", action((c, e) => e.cancel(idOf(c), "viewer", opts.scope(c)), (c) => instanceUrl(idOf(c), "cancelled"), instanceRefused));
  ui.post("/instances/:id/resume", action((c, e) => e.resume(idOf(c), opts.scope(c)), (c) => instanceUrl(idOf(c), "resumed"), instanceRefused));
  // Repairs: each makes a new instance (the original is unchanged) and the redirect goes to it.
  ui.post("/instances/:id/rerun", action((c, e) => e.rerun(idOf(c), {}, opts.scope(c)), (_c, r) => instanceUrl(r.instanceId, "rerun"), instanceRefused));
  ui.post(
    "/instances/:id/fork",
    action(
      async (c, e) => {
        const from = ((await formValues(c)).fromActivityId ?? "").trim();
        if (!from || from.length > 255) throw new ValidationError("fromActivityId must be 1–255 characters", [{ path: ["fromActivityId"], message: "required" }]);
        return e.fork(idOf(c), { fromActivityId: from }, opts.scope(c));
      },
      (_c, r) => instanceUrl(r.instanceId, "forked"),
      instanceRefused,
    ),
  );
  ui.post("/instances/:id/messages", async (c) => {
    const id = c.req.param("id");
    const form = await formValues(c);
    const channel = (form.channel ?? "").trim();
    const data = parseData(form.data);
    const values = { channel, data: form.data ?? "" };
    if (!channel || channel.length > 255) return instancePage(c, id, { problem: { message: "channel must be 1–255 characters" }, message: values }, 422);
    if (!data.ok) return instancePage(c, id, { problem: { message: data.message }, message: values }, 422);
    const e = await opts.engine(c);
    if (!(await e.instanceExists(id))) throw new NotFoundError(`instance "${id}" not found`);
    await e.publish(channel, data.value, { targetInstanceId: id, metadata: { sent_by: "viewer" } }, opts.scope(c));
    return c.redirect(instanceUrl(id, "sent"), 303);
  });

  bulkRoutes(ui, { engine: opts.engine, scope: opts.scope, render, formValues, notice: noticeOf });

  // --- starting workflows -----------------------------------------------------------
  ui.get("/workflows", async (c) => {
    const e = await opts.engine(c);
    const wfs = [...e.workflows.values()].sort((a, b) => a.workflowName.localeCompare(b.workflowName));
    return render(
      c,
      "Start a workflow",
      <>
        <h1>Start a workflow</h1>
        <div class="card">
          <table>
            <tbody>
              {wfs.map((w) => (
                <tr>
                  <td>
                    <a href={`/ui/workflows/${encodeURIComponent(w.workflowName)}/start`}>{w.workflowName}</a>
                    {w.options.description ? <div class="small">{w.options.description}</div> : null}
                  </td>
                  <td class="small muted">{inputFields(w)?.map((f) => `${f.name}${f.required ? "" : "?"}: ${f.options ? f.options.join(" | ") : f.kind}`).join(", ") ?? "JSON input"}</td>
                  <td class="small">
                    <a href={`/ui?workflow=${encodeURIComponent(w.workflowName)}`}>instances</a>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </>,
    );
  });
  const startPage = async (c: C, values: Record<string, string>, problem?: { message: string; issues?: { path?: PropertyKey[]; message: string }[] }, status = 200) => {
    const e = await opts.engine(c);
    const wf = e.workflow(c.req.param("name") ?? "");
    return render(
      c,
      `Start ${wf.workflowName}`,
      <>
        <p class="small">
          <a href="/ui/workflows">← workflows</a>
        </p>
        <h1>Start {wf.workflowName}</h1>
        {wf.options.description ? <p>{wf.options.description}</p> : null}
        <StartForm workflow={wf.workflowName} fields={inputFields(wf)} values={values} problem={problem} />
      </>,
      status,
    );
  };
  ui.get("/workflows/:name/start", (c) => startPage(c, {}));
  ui.post("/workflows/:name/start", async (c) => {
    const e = await opts.engine(c);
    const wf = e.workflow(c.req.param("name"));
    const form = await formValues(c);
    const read = readInput(inputFields(wf), form);
    if ("issues" in read) return startPage(c, form, { message: "the input is invalid", issues: read.issues }, 422);
    const instanceId = (form.instanceId ?? "").trim();
    try {
      const r = await e.start(wf, read.input, instanceId ? { instanceId } : {}, opts.scope(c));
      return c.redirect(instanceUrl(r.instanceId, "started"), 303);
    } catch (err) {
      if (err instanceof ValidationError) return startPage(c, form, { message: err.message, issues: err.issues as never }, 422);
      throw err;
    }
  });

  // --- channels --------------------------------------------------------------------
  ui.get("/channels", async (c) => {
    const e = await opts.engine(c);
    const notice = noticeOf(c);
    return render(c, "Channels", <ChannelsPage channels={await e.channelOverview(200)} now={new Date()} notice={notice} />);
  });
  ui.post("/channels/publish", async (c) => {
    const form = await formValues(c);
    const channel = (form.channel ?? "").trim();
    const data = parseData(form.data);
    const values = { channel, data: form.data ?? "" };
    const refuse = async (message: string) => {
      const e = await opts.engine(c);
      return render(c, "Channels", <ChannelsPage channels={await e.channelOverview(200)} now={new Date()} problem={message} values={values} />, 422);
    };
    if (!channel || channel.length > 255) return refuse("channel must be 1–255 characters");
    if (!data.ok) return refuse(data.message);
    const e = await opts.engine(c);
    await e.publish(channel, data.value, { metadata: { sent_by: "viewer" } }, opts.scope(c));
    return c.redirect(`/ui/channels/${encodeURIComponent(channel)}?notice=published`, 303);
  });
  ui.get("/channels/:name{.+}", async (c) => {
    const e = await opts.engine(c);
    const channel = c.req.param("name");
    const { subscribers, pending } = await e.channelDetail(channel, { subscribers: 500, pending: 100 });
    const notice = noticeOf(c);
    return render(
      c,
      channel,
      <>
        {notice ? <div class="notice">{notice}</div> : null}
        <ChannelPage channel={channel} subscribers={subscribers} pending={pending} now={new Date()} />
      </>,
    );
  });

  // --- schedules ---------------------------------------------------------------------
  const schedulesPage = async (c: C, problem?: string, status = 200) =>
    render(c, "Schedules", <SchedulesPage schedules={await listAppSchedules(await opts.engine(c))} now={new Date()} notice={noticeOf(c)} problem={problem} />, status);
  ui.get("/schedules", (c) => schedulesPage(c));
  const workflowOf = (c: C) => c.req.param("workflow") ?? "";
  const schedulesRefused = (c: C, message: string) => schedulesPage(c, message, 409);
  ui.post("/schedules/:workflow/pause", action((c, e) => e.pauseSchedule(workflowOf(c)), () => "/ui/schedules?notice=paused", schedulesRefused));
  ui.post("/schedules/:workflow/resume", action((c, e) => e.resumeSchedule(workflowOf(c)), () => "/ui/schedules?notice=schedule-resumed", schedulesRefused));
  ui.post("/schedules/:workflow/trigger", action((c, e) => e.triggerSchedule(workflowOf(c), undefined, opts.scope(c)), (_c, r) => instanceUrl(r.instanceId, "triggered"), schedulesRefused));

  // --- outbox dead letters ------------------------------------------------------------
  const outboxPage = async (c: C, refused?: string, status = 200) => {
    const e = await opts.engine(c);
    const wanted = c.req.query("status") ?? "";
    const only = DEAD_LETTER_STATUSES.find((s) => s === wanted);
    let cursor = (c.req.query("cursor") ?? "").slice(0, 1000);
    let problem = refused;
    let page;
    try {
      page = await listDeadLetters(e, { ...(only ? { status: [only] } : {}), ...(cursor ? { cursor } : {}), limit: 50 });
    } catch (err) {
      if (!(err instanceof InvalidArgumentError)) throw err;
      problem ??= "That page link is no longer valid; showing the newest dead letters.";
      cursor = "";
      page = await listDeadLetters(e, { ...(only ? { status: [only] } : {}), limit: 50 });
    }
    return render(c, "Outbox", <OutboxPage events={page.events} nextCursor={page.nextCursor} status={only ?? ""} cursor={cursor} now={new Date()} notice={noticeOf(c)} problem={problem} />, status);
  };
  ui.get("/outbox", (c) => outboxPage(c));
  const eventIdOf = (c: C) => c.req.param("eventId") ?? "";
  const outboxRefused = (c: C, message: string) => outboxPage(c, message, 409);
  ui.post("/outbox/:eventId/redeliver", action((c, e) => redeliverDeadLetter(e, eventIdOf(c), opts.scope(c)), () => "/ui/outbox?notice=redelivered", outboxRefused));
  ui.post("/outbox/:eventId/discard", action((c, e) => discardDeadLetter(e, eventIdOf(c)), () => "/ui/outbox?notice=discarded", outboxRefused));

  // --- received CloudEvents, and an instance's whole history as a download ------------------
  ui.get("/events", async (c) => {
    const e = await opts.engine(c);
    const before = parseEventsCursor(c.req.query("cursor"));
    const events = await e.receivedEvents(EVENTS_PAGE, before);
    const next = events.length === EVENTS_PAGE ? `/ui/events?cursor=${encodeURIComponent(eventsCursor(events[events.length - 1]!))}` : null;
    return render(c, "Received events", <EventsPage events={events} next={next} />);
  });
  ui.get("/instances/:id/history.json", async (c) => {
    const id = c.req.param("id");
    const e = await opts.engine(c);
    if (!(await e.instanceExists(id))) return errorPage(c, 404, `instance "${id}" not found`);
    const file = `${id.replace(/[^\w.-]/g, "_").slice(0, 100)}-history.json`;
    return historyExport(c, e, id, "json", opts.scope(c), { "content-disposition": `attachment; filename="${file}"` });
  });

  ui.all("*", (c) => errorPage(c, 404, "no such page"));
  return ui;
}
