/**
 * Edda Edge — durable execution for serverless and edge platforms.
 * The public surface: definitions, workflow operations, errors, the app
 * factory and the storage drivers.
 */
export { activity, workflow } from "./core/definitions.ts";
export type { Activity, ActivityOptions, Workflow, WorkflowOptions, WorkflowInput, WorkflowOutput } from "./core/definitions.ts";
export type { ActivityContext, WorkflowContext, Transaction } from "./core/context.ts";
export { sleep, sleepUntil, registerCompensation } from "./core/primitives.ts";
export type { RetryPolicy } from "./core/retry.ts";
export { DEFAULT_RETRY_POLICY } from "./core/retry.ts";
export * from "./core/errors.ts";
export { createEdda } from "./edda.ts";
export type { Edda, EddaOptions, DispatcherOption } from "./edda.ts";
export type { EngineHooks } from "./engine/hooks.ts";
export { LocalDispatcher } from "./engine/dispatcher.ts";
export type { Dispatcher, StepRequest } from "./engine/dispatcher.ts";
export { HttpDispatcher } from "./engine/http-dispatcher.ts";
export type { Database } from "./storage/database.ts";
export { migrate } from "./storage/migrate.ts";
export { createStorage } from "./storage/pg-storage.ts";
export { receive, waitMessage, waitEvent } from "./core/waits.ts";
export { race, onTimer, onTimerUntil, onMessage, onEvent } from "./core/race.ts";
export type { RaceBranch, RaceResult } from "./core/race.ts";
export type { ChannelMessage, ReceivedEvent, ReceiveOptions, WaitEventOptions } from "./core/waits.ts";
export { subscribe, unsubscribe, publish, sendTo, sendMessageTo, joinGroup, leaveGroup, publishToGroup } from "./engine/messaging.ts";
export type { PublishOptions, Publisher } from "./engine/messaging.ts";
export type { ChannelMode } from "./core/model.ts";
export { sendEvent, sendEventTransactional } from "./engine/events.ts";
export type { OutgoingEvent } from "./engine/events.ts";
