/** Handlers, one per job type: `registry.register("charge-card", async (job) => ({...}))`. */
import type { Job } from "./job.js";

/** What a handler may resolve to: the variables to set, or nothing. */
// biome-ignore lint/suspicious/noConfusingVoidType: an async handler without a return resolves to void
export type HandlerResult = Record<string, unknown> | null | undefined | void;

/**
 * A handler gets the {@link Job} and resolves to the variables to set on the instance (an
 * object, or nothing). Throwing `NonRetryableError` fails the job at once; a `JobError` may ask
 * for a retry delay, and either may carry an `output` the failed step keeps; anything else
 * thrown fails it as retryable.
 */
export type Handler = (job: Job) => Promise<HandlerResult> | HandlerResult;

// The engine's rule for job type names: a letter or digit, then letters, digits and _ . : -.
const JOB_TYPE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

export class Registry {
  readonly #handlers = new Map<string, Handler>();

  /**
   * Register `handler` for `jobType`. A second handler for a type is an error unless
   * `{ replace: true }`; an invalid job type is refused at once. Returns the handler.
   */
  register<H extends Handler>(jobType: string, handler: H, options: { replace?: boolean } = {}): H {
    if (!JOB_TYPE.test(jobType)) {
      throw new TypeError(
        `invalid job type ${JSON.stringify(jobType)}: letters, digits and . _ - : (up to 128)`,
      );
    }
    if (typeof handler !== "function") throw new TypeError("a handler must be a function");
    if (this.#handlers.has(jobType) && !options.replace) {
      throw new Error(`a handler for ${jobType} is already registered (pass { replace: true })`);
    }
    this.#handlers.set(jobType, handler);
    return handler;
  }

  get(jobType: string): Handler | undefined {
    return this.#handlers.get(jobType);
  }

  has(jobType: string): boolean {
    return this.#handlers.has(jobType);
  }

  get jobTypes(): string[] {
    return [...this.#handlers.keys()];
  }

  get size(): number {
    return this.#handlers.size;
  }
}
