/**
 * The order-fulfilment handlers (the walk-through of examples/order_fulfilment, in TypeScript).
 *
 * `charge-card` fails transiently on the first attempt of every order (a flaky payment gateway),
 * so each instance shows one retry in its history; an order whose amount is not positive fails at
 * once with NonRetryableError (retrying would not help).
 */
import { createHash } from "node:crypto";
import { type Job, NonRetryableError, Registry } from "@baton/worker";

export const registry = new Registry();

function token(prefix: string, ...parts: unknown[]): string {
  const digest = createHash("sha256").update(parts.map(String).join("|")).digest("hex");
  return `${prefix}-${digest.slice(0, 8).toUpperCase()}`;
}

interface Item {
  sku: string;
  qty?: number;
}

registry.register("reserve-stock", async (job: Job) => {
  const items = (job.input.items ?? []) as unknown as Item[];
  if (items.length === 0) throw new NonRetryableError("the order has no items");
  const units = items.reduce((sum, item) => sum + Number(item.qty ?? 1), 0);
  job.logger.info("stock reserved", { units });
  return { reservationId: token("RSV", job.instanceId), unitsReserved: units };
});

registry.register("charge-card", async (job: Job) => {
  const amount = Number(job.input.amount ?? 0);
  if (!(amount > 0)) {
    throw new NonRetryableError(`cannot charge ${amount}: the amount must be positive`);
  }
  if (job.attempt === 1) {
    // Any other error is retryable: the engine schedules attempt 2 after retryDelaySeconds.
    throw new Error("payment gateway timed out (simulated; attempt 2 will succeed)");
  }
  job.logger.info("card charged", { amount });
  return { receipt: token("RCPT", job.instanceId), charged: amount };
});

registry.register("ship-parcel", async (job: Job) => {
  const tracking = token("TRK", job.instanceId, job.input.address);
  job.logger.info("parcel shipped", { tracking });
  return { tracking };
});

registry.register("send-confirmation", async (job: Job) => {
  // Stands in for an HTTP call to a mail service; job.signal aborts if the lease is lost.
  await new Promise((resolve) => setTimeout(resolve, 50));
  job.logger.info("confirmation sent", { to: job.input.email });
  return { confirmationSent: true };
});
