package dev.baton.worker;

import java.net.URI;
import java.util.Map;
import java.util.Objects;

/** Sends {@code x-api-key: <key>} with every request ({@code baton dev}, API Gateway keys). */
public final class ApiKeyAuth implements RequestAuth {
  public static final String HEADER = "x-api-key";

  private final String key;
  private final String source;

  /** A key given in code. */
  public ApiKeyAuth(String key) {
    this(key, "the API key given to the client");
  }

  /** A key and where it was found (said in the message of a 401/403). */
  public ApiKeyAuth(String key, String source) {
    Objects.requireNonNull(key, "key");
    if (key.isBlank()) {
      throw new IllegalArgumentException("the API key must not be empty");
    }
    this.key = key.strip();
    this.source = source;
  }

  @Override
  public Map<String, String> headers(
      String method, URI uri, Map<String, String> headers, byte[] body) {
    return Map.of(HEADER, key);
  }

  @Override
  public String describe() {
    return source;
  }

  @Override
  public String toString() { // never print the key
    return "ApiKeyAuth(" + source + ")";
  }
}
