/**
 * The runner's parallelism semaphore, in the shape the poll loop needs: a poll asks for as many
 * jobs as there are free slots, so slots are reserved before the poll (`acquireUpTo`) and the
 * unused ones handed back when fewer jobs come (`release`).
 */
export class Slots {
  #inUse = 0;
  #waiters: (() => void)[] = [];
  #interrupted = false;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError("capacity must be a whole number, at least 1");
    }
  }

  get inUse(): number {
    return this.#inUse;
  }

  get free(): number {
    return this.capacity - this.#inUse;
  }

  /**
   * Wait until a slot is free, then take up to `n`. With `gather` (seconds): while fewer than
   * `enough` are free and others are in use, wait up to that long for more, so one poll asks
   * for several jobs. Resolves to how many were taken: 0 after {@link interrupt}.
   */
  async acquireUpTo(n: number, gather = 0, enough = 1): Promise<number> {
    while (this.#inUse >= this.capacity && !this.#interrupted) await this.#changed();
    if (gather > 0) {
      const until = performance.now() + gather * 1000;
      while (this.free < Math.min(enough, n) && this.#inUse > 0 && !this.#interrupted) {
        const left = until - performance.now();
        if (left <= 0) break;
        await this.#changed(left);
      }
    }
    if (this.#interrupted) return 0;
    const taken = Math.min(n, this.free);
    this.#inUse += taken;
    return taken;
  }

  /** Take one slot, waiting for it (not interruptible: for jobs already claimed). */
  async acquire(): Promise<void> {
    while (this.#inUse >= this.capacity) await this.#changed();
    this.#inUse += 1;
  }

  release(n = 1): void {
    if (n < 0 || n > this.#inUse)
      throw new RangeError(`cannot release ${n}: ${this.#inUse} in use`);
    this.#inUse -= n;
    this.#wake();
  }

  /** Wake every waiter of acquireUpTo, which then takes nothing (shutdown). */
  interrupt(): void {
    this.#interrupted = true;
    this.#wake();
  }

  /** Resolves true once no slot is in use, false after `timeout` seconds (undefined: wait). */
  async waitIdle(timeout?: number): Promise<boolean> {
    const until = timeout === undefined ? undefined : performance.now() + timeout * 1000;
    while (this.#inUse > 0) {
      const left = until === undefined ? undefined : until - performance.now();
      if (left !== undefined && left <= 0) return false;
      await this.#changed(left);
    }
    return true;
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  #changed(timeoutMs?: number): Promise<void> {
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const wake = () => {
        if (timer) clearTimeout(timer);
        resolve();
      };
      this.#waiters.push(wake);
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.#waiters = this.#waiters.filter((w) => w !== wake);
          resolve();
        }, timeoutMs);
      }
    });
  }
}
