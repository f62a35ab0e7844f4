/** The example workflows every entry point serves. */
import { announce } from "./announce.ts";
import { approval } from "./approval.ts";
import { approvalLink } from "./approval-link.ts";
import { fanoutChildren } from "./fanout-children.ts";
import { dailyReport } from "./daily-report.ts";
import { exportReport } from "./export-report.ts";
import { largeReport } from "./large-report.ts";
import { accountSync } from "./account-sync.ts";
import { partnerCall } from "./partner-call.ts";
import { searchReindex } from "./search-reindex.ts";
import { environmentDeploy } from "./environment-deploy.ts";
import { firstResponse } from "./first-response.ts";
import { jobWorker } from "./job-worker.ts";
import { notifier } from "./notifier.ts";
import { orderSaga } from "./order-saga.ts";
import { paymentWait } from "./payment-wait.ts";
import { pipeline } from "./pipeline.ts";
import { reminder } from "./reminder.ts";
import { sendInvoice } from "./send-invoice.ts";
import { stripeCheckout } from "./stripe-checkout.ts";
import { summarize } from "./summarize.ts";
import { stripeVerifier, webhook } from "../../src/index.ts";

export const workflows = [orderSaga, pipeline, reminder, approval, paymentWait, jobWorker, notifier, announce, firstResponse, fanoutChildren, dailyReport, accountSync, partnerCall, searchReindex, environmentDeploy, exportReport, sendInvoice, stripeCheckout, summarize, approvalLink, largeReport];

/** The webhook sources every entry point serves: POST /webhooks/stripe, verified with EDDA_WEBHOOK_STRIPE_SECRET. */
export const webhooks = [webhook("stripe", { verify: stripeVerifier() })];
