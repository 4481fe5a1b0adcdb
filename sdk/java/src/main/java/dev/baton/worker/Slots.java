package dev.baton.worker;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The parallelism semaphore in the shape the poll loop needs: slots are reserved before a poll
 * ({@link #acquireUpTo}), so a poll never asks for more jobs than there are free slots, and the
 * unused ones handed back when fewer jobs come. Every job holds one slot from its dispatch until
 * its outcome is reported.
 */
final class Slots {
  private final int capacity;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  private int inUse;
  private boolean interrupted;
  // What the waiter of acquireUpTo needs free to go on (0: none waits). A release wakes it only
  // then, or when nothing is in use (awaitIdle): not once per finished job.
  private int wanted;

  Slots(int capacity) {
    if (capacity < 1) {
      throw new IllegalArgumentException("capacity must be at least 1");
    }
    this.capacity = capacity;
  }

  int inUse() {
    lock.lock();
    try {
      return inUse;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Waits until a slot is free, then takes up to {@code n}. With {@code gatherNanos}: while fewer
   * than {@code enough} are free and others are in use, waits that long more for them. Returns how
   * many were taken: 0 after {@link #interrupt()}.
   */
  int acquireUpTo(int n, long gatherNanos, int enough) {
    lock.lock();
    try {
      wanted = 1;
      while (inUse >= capacity && !interrupted) {
        changed.awaitUninterruptibly();
      }
      if (gatherNanos > 0) {
        long left = gatherNanos;
        wanted = Math.min(enough, n);
        while (capacity - inUse < wanted && inUse > 0 && !interrupted && left > 0) {
          try {
            left = changed.awaitNanos(left);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            break;
          }
        }
      }
      wanted = 0;
      if (interrupted) {
        return 0;
      }
      int taken = Math.min(n, capacity - inUse);
      inUse += taken;
      return taken;
    } finally {
      lock.unlock();
    }
  }

  void release(int n) {
    lock.lock();
    try {
      if (n < 0 || n > inUse) {
        throw new IllegalStateException("cannot release " + n + " slots: " + inUse + " in use");
      }
      inUse -= n;
      if (inUse == 0 || (wanted > 0 && capacity - inUse >= wanted)) {
        changed.signalAll();
      }
    } finally {
      lock.unlock();
    }
  }

  /** Wakes every waiter of {@link #acquireUpTo}, which then takes nothing (stopping). */
  void interrupt() {
    lock.lock();
    try {
      interrupted = true;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /** Waits until no slot is in use; false after {@code timeoutNanos} (negative: no bound). */
  boolean awaitIdle(long timeoutNanos) {
    lock.lock();
    try {
      long left = timeoutNanos;
      while (inUse > 0) {
        if (timeoutNanos < 0) {
          changed.awaitUninterruptibly();
        } else {
          if (left <= 0) {
            return false;
          }
          try {
            left = changed.awaitNanos(left);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return inUse == 0;
          }
        }
      }
      return true;
    } finally {
      lock.unlock();
    }
  }

  static long nanos(double seconds) {
    return TimeUnit.MICROSECONDS.toNanos((long) (seconds * 1e6));
  }
}
