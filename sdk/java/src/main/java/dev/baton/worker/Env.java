package dev.baton.worker;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The environment variables the SDK reads and where a local {@code baton dev} keeps its key.
 *
 * <p>Precedence everywhere: an explicit argument, then these variables, then the defaults. The key
 * is the argument, else {@code BATON_API_KEY}, else (for a server on this machine only) the file
 * {@code $BATON_DATA_DIR/api-key}, {@code BATON_DATA_DIR} defaulting to {@code .baton/data}.
 */
public final class Env {
  public static final String URL = "BATON_URL";
  public static final String API_KEY = "BATON_API_KEY";
  public static final String DATA_DIR = "BATON_DATA_DIR";
  public static final String DISPATCH_QUEUE_URL = "BATON_DISPATCH_QUEUE_URL";
  public static final String SQS_ENDPOINT = "BATON_SQS_ENDPOINT";
  /** The client's wire: {@code rest} (the default) or {@code connect}; see {@link Protocol}. */
  public static final String PROTOCOL = "BATON_PROTOCOL";
  public static final String DEFAULT_URL = "http://127.0.0.1:8080";
  public static final String DEFAULT_DATA_DIR = ".baton/data";
  public static final String API_KEY_FILE = "api-key";

  private static final Set<String> LOOPBACK = Set.of("127.0.0.1", "localhost", "::1", "[::1]");

  private Env() {}

  /** {@code BATON_URL}, else {@code http://127.0.0.1:8080}. */
  public static String url(Map<String, String> env) {
    String url = env.get(URL);
    return url == null || url.isBlank() ? DEFAULT_URL : url;
  }

  /** {@code BATON_PROTOCOL}, else {@link Protocol#REST}. */
  public static Protocol protocol(Map<String, String> env) {
    return Protocol.parse(env.get(PROTOCOL));
  }

  /** Where {@code baton dev} keeps its key: {@code $BATON_DATA_DIR/api-key}. */
  public static Path localApiKeyPath(Map<String, String> env) {
    String dir = env.get(DATA_DIR);
    return Path.of(dir == null || dir.isBlank() ? DEFAULT_DATA_DIR : dir, API_KEY_FILE);
  }

  /**
   * {@code BATON_API_KEY}, else the key of a local {@code baton dev} when {@code url} is on this
   * machine (never sent to another host); empty when neither.
   */
  public static Optional<ApiKeyAuth> apiKey(String url, Map<String, String> env) {
    String key = env.get(API_KEY);
    if (key != null && !key.isBlank()) {
      return Optional.of(new ApiKeyAuth(key, "the API key from " + API_KEY));
    }
    if (!isLoopback(url)) {
      return Optional.empty();
    }
    Path path = localApiKeyPath(env);
    try {
      String text = Files.readString(path, StandardCharsets.US_ASCII).strip();
      if (text.isEmpty()) {
        return Optional.empty();
      }
      String where =
          env.get(DATA_DIR) == null ? "(" + DEFAULT_DATA_DIR + ", the default)" : "($" + DATA_DIR + ")";
      return Optional.of(
          new ApiKeyAuth(text, "the API key read from " + path.toAbsolutePath() + " " + where));
    } catch (IOException | SecurityException e) {
      return Optional.empty();
    }
  }

  static boolean isLoopback(String url) {
    try {
      String host = URI.create(url).getHost();
      return host != null && LOOPBACK.contains(host);
    } catch (IllegalArgumentException e) {
      return false;
    }
  }
}
