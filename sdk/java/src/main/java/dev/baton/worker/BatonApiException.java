package dev.baton.worker;

import java.time.Duration;
import java.util.List;
import java.util.stream.Collectors;

/**
 * The API answered with an error status. Carries the fields of the server's RFC 9457 problem
 * ({@code application/problem+json}): {@link #status()}, {@link #title()}, {@link #detail()} and
 * {@link #errors()} (one entry per rule broken, with its JSON path).
 *
 * <p>Subclasses name the statuses a caller branches on: {@link Unauthorized} (401), {@link
 * Forbidden} (403), {@link NotFound} (404), {@link Conflict} (409), {@link Invalid} (422), {@link
 * RateLimited} (429) and {@link ServerError} (5xx).
 */
public class BatonApiException extends BatonException {
  private static final long serialVersionUID = 1L;

  /** One entry of a problem's {@code errors}: where (a JSON path) and what. */
  public record ProblemItem(String path, String message) {}

  private final int status;
  private final String title;
  private final String detail;
  private final List<ProblemItem> errors;
  private final String type;
  private final Duration retryAfter;

  public BatonApiException(
      int status,
      String title,
      String detail,
      List<ProblemItem> errors,
      String type,
      Duration retryAfter) {
    this(status, title, detail, errors, type, retryAfter, null);
  }

  BatonApiException(
      int status,
      String title,
      String detail,
      List<ProblemItem> errors,
      String type,
      Duration retryAfter,
      String hint) {
    super(summary(status, title, detail, errors) + (hint == null ? "" : " " + hint));
    this.status = status;
    this.title = title;
    this.detail = detail == null ? "" : detail;
    this.errors = List.copyOf(errors);
    this.type = type;
    this.retryAfter = retryAfter;
  }

  /** Builds the subclass of an HTTP status. {@code hint} (or null) ends the message. */
  public static BatonApiException of(
      int status,
      String title,
      String detail,
      List<ProblemItem> errors,
      String type,
      Duration retryAfter,
      String hint) {
    switch (status) {
      case 401:
        return new Unauthorized(title, detail, errors, type, hint);
      case 403:
        return new Forbidden(title, detail, errors, type, hint);
      case 404:
        return new NotFound(title, detail, errors, type);
      case 409:
        return new Conflict(title, detail, errors, type);
      case 422:
        return new Invalid(title, detail, errors, type);
      case 429:
        return new RateLimited(title, detail, errors, type, retryAfter);
      default:
        if (status >= 500) {
          return new ServerError(status, title, detail, errors, type, retryAfter);
        }
        return new BatonApiException(status, title, detail, errors, type, retryAfter, hint);
    }
  }

  static String summary(int status, String title, String detail, List<ProblemItem> errors) {
    StringBuilder text = new StringBuilder().append(status).append(' ').append(title);
    String d = detail == null ? "" : detail;
    if (!d.isEmpty() && !d.equals(title)) {
      text.append(": ").append(d);
    }
    List<ProblemItem> listed =
        errors.stream().filter(e -> !d.contains(e.message())).collect(Collectors.toList());
    if (!listed.isEmpty()) {
      text.append(" (")
          .append(
              listed.stream()
                  .map(e -> e.path() + ": " + e.message())
                  .collect(Collectors.joining("; ")))
          .append(')');
    }
    return text.toString();
  }

  public int status() {
    return status;
  }

  public String title() {
    return title;
  }

  public String detail() {
    return detail;
  }

  public List<ProblemItem> errors() {
    return errors;
  }

  /** The problem's {@code type} URI, or null. */
  public String type() {
    return type;
  }

  /** The server's {@code Retry-After}, or null. */
  public Duration retryAfter() {
    return retryAfter;
  }

  /** The one-line summary: {@code 404 Not Found: instance 'x' not found}. */
  public String summary() {
    return summary(status, title, detail, errors);
  }

  /** True when the same request may succeed later (429 and 5xx). */
  public boolean isTransient() {
    return status == 429 || status >= 500;
  }

  /** 401: no credentials, or credentials the API does not recognise. */
  public static final class Unauthorized extends BatonApiException {
    private static final long serialVersionUID = 1L;

    Unauthorized(String title, String detail, List<ProblemItem> errors, String type, String hint) {
      super(401, title, detail, errors, type, null, hint);
    }
  }

  /** 403: the credentials may not do this (or the API key is wrong). */
  public static final class Forbidden extends BatonApiException {
    private static final long serialVersionUID = 1L;

    Forbidden(String title, String detail, List<ProblemItem> errors, String type, String hint) {
      super(403, title, detail, errors, type, null, hint);
    }
  }

  /** 404: an unknown id, name or route. */
  public static final class NotFound extends BatonApiException {
    private static final long serialVersionUID = 1L;

    NotFound(String title, String detail, List<ProblemItem> errors, String type) {
      super(404, title, detail, errors, type, null);
    }
  }

  /** 409: the request conflicts with the current state (another worker holds the job). */
  public static final class Conflict extends BatonApiException {
    private static final long serialVersionUID = 1L;

    Conflict(String title, String detail, List<ProblemItem> errors, String type) {
      super(409, title, detail, errors, type, null);
    }
  }

  /** 422: schema or rule violations; {@link #errors()} lists every one. */
  public static final class Invalid extends BatonApiException {
    private static final long serialVersionUID = 1L;

    Invalid(String title, String detail, List<ProblemItem> errors, String type) {
      super(422, title, detail, errors, type, null);
    }
  }

  /** 429: throttled; retry after {@link #retryAfter()}. */
  public static final class RateLimited extends BatonApiException {
    private static final long serialVersionUID = 1L;

    RateLimited(
        String title, String detail, List<ProblemItem> errors, String type, Duration retryAfter) {
      super(429, title, detail, errors, type, retryAfter);
    }
  }

  /** 5xx: the server failed (503: a dependency is unavailable); the request may have applied. */
  public static final class ServerError extends BatonApiException {
    private static final long serialVersionUID = 1L;

    ServerError(
        int status,
        String title,
        String detail,
        List<ProblemItem> errors,
        String type,
        Duration retryAfter) {
      super(status, title, detail, errors, type, retryAfter);
    }
  }
}
