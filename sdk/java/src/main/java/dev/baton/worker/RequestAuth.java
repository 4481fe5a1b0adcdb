package dev.baton.worker;

import java.net.URI;
import java.util.Map;

/**
 * Credentials for Baton's API: the headers that authorise one request. {@link ApiKeyAuth} sends
 * {@code x-api-key}; {@link AwsSigV4Auth} signs each request with AWS Signature Version 4.
 */
public interface RequestAuth {
  /**
   * The headers to add to a request ({@code headers} are those it already carries; {@code body}
   * is its exact body, empty for none).
   */
  Map<String, String> headers(String method, URI uri, Map<String, String> headers, byte[] body);

  /** Where these credentials came from, named in the message of a 401 or 403. */
  String describe();
}
