package dev.baton.worker;

/** The SDK's version, sent in the user agent. */
public final class Version {
  public static final String VERSION = "0.1.0";

  private Version() {}
}
