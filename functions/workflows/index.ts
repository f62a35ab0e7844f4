/** The example workflows every entry point serves. */
import { orderSaga } from "./order-saga.ts";
import { pipeline } from "./pipeline.ts";

export const workflows = [orderSaga, pipeline];
