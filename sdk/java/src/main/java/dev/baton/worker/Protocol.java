package dev.baton.worker;

import java.util.Locale;

/**
 * The client's wire: {@link #REST} (JSON, the default) or {@link #CONNECT} (each call as the RPC
 * of {@code engine.proto}'s {@code WorkflowEngine} service that mirrors it, binary protobuf over
 * the Connect protocol). Chosen by {@link BatonClient.Builder#protocol} or {@code BATON_PROTOCOL}.
 * Both give the same answers and the same exceptions.
 */
public enum Protocol {
  REST,
  CONNECT;

  /** {@code rest} or {@code connect} (any case); anything else is refused, naming both. */
  public static Protocol parse(String value) {
    String v = value == null ? "" : value.strip().toLowerCase(Locale.ROOT);
    switch (v) {
      case "":
      case "rest":
        return REST;
      case "connect":
        return CONNECT;
      default:
        throw new IllegalArgumentException(
            Env.PROTOCOL + " must be rest or connect, not '" + value + "'");
    }
  }
}
