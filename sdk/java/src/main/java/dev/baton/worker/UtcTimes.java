package dev.baton.worker;

import java.time.DateTimeException;
import java.time.Instant;
import java.time.LocalDate;

/**
 * The server's timestamps ({@code 2026-11-26T11:00:46.908123Z}: UTC, 0 to 9 fraction digits) read
 * without {@code DateTimeFormatter}, whose general parser cost a few microseconds and a dozen
 * objects for every claimed job's {@code lockExpiresAt}. Anything else: null (the caller falls
 * back to {@code Instant.parse}).
 */
final class UtcTimes {
  private static final int[] SCALE = {100_000_000, 10_000_000, 1_000_000, 100_000, 10_000, 1_000, 100, 10, 1};

  private UtcTimes() {}

  static Instant parse(String t) {
    int n = t.length();
    if (n < 20 || n > 30 || t.charAt(n - 1) != 'Z' || t.charAt(4) != '-' || t.charAt(7) != '-'
        || t.charAt(10) != 'T' || t.charAt(13) != ':' || t.charAt(16) != ':') {
      return null;
    }
    int year = digits(t, 0, 4);
    int month = digits(t, 5, 7);
    int day = digits(t, 8, 10);
    int hour = digits(t, 11, 13);
    int minute = digits(t, 14, 16);
    int second = digits(t, 17, 19);
    if (year < 0 || month < 0 || day < 0 || hour < 0 || hour > 23 || minute < 0 || minute > 59
        || second < 0 || second > 59) {
      return null;
    }
    int nanos = 0;
    if (n > 20) {
      int fraction = n - 21;
      if (t.charAt(19) != '.' || fraction < 1) {
        return null;
      }
      int value = digits(t, 20, n - 1);
      if (value < 0) {
        return null;
      }
      nanos = value * SCALE[fraction - 1];
    }
    try {
      long days = LocalDate.of(year, month, day).toEpochDay();
      return Instant.ofEpochSecond(days * 86_400 + hour * 3_600L + minute * 60L + second, nanos);
    } catch (DateTimeException e) { // February 30th and the like
      return null;
    }
  }

  /** The decimal value of {@code t[from, to)}, or -1 if a character is not a digit. */
  private static int digits(String t, int from, int to) {
    int value = 0;
    for (int i = from; i < to; i++) {
      char c = t.charAt(i);
      if (c < '0' || c > '9') {
        return -1;
      }
      value = value * 10 + (c - '0');
    }
    return value;
  }
}
