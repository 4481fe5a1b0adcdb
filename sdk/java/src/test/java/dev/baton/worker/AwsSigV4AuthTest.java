package dev.baton.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.security.MessageDigest;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Map;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;

class AwsSigV4AuthTest {
  private static AwsSigV4Auth auth(String service) {
    return AwsSigV4Auth.builder()
        .credentials(StaticCredentialsProvider.create(
            AwsBasicCredentials.create("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")))
        .region("us-east-1")
        .service(service)
        .clock(Clock.fixed(Instant.parse("2015-08-30T12:36:00Z"), ZoneOffset.UTC))
        .build();
  }

  private static final String EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

  /** SigV4 by the book (the reference's steps), to check the SDK's signer against. */
  private static String signature(String canonicalHeaders, String signedHeaders) throws Exception {
    String canonical = "GET\n/\n\n" + canonicalHeaders + "\n" + signedHeaders + "\n" + EMPTY_SHA256;
    String toSign = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
        + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(canonical.getBytes(StandardCharsets.UTF_8)));
    byte[] key = "AWS4wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".getBytes(StandardCharsets.UTF_8);
    for (String part : new String[] {"20150830", "us-east-1", "service", "aws4_request", toSign}) {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(key, "HmacSHA256"));
      key = mac.doFinal(part.getBytes(StandardCharsets.UTF_8));
    }
    return HexFormat.of().formatHex(key);
  }

  /** AWS's published SigV4 test suite, case get-vanilla (the signer also signs the payload hash). */
  @Test
  void matchesTheGetVanillaVector() throws Exception {
    // The reference computation reproduces the published signature of get-vanilla...
    assertEquals("5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        signature("host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n", "host;x-amz-date"));
    // ...and the SDK's signer, which adds x-amz-content-sha256, matches it on the same request.
    Map<String, String> headers = auth("service").headers("GET", URI.create("https://example.amazonaws.com/"), Map.of(), new byte[0]);
    assertEquals("20150830T123600Z", headers.get("X-Amz-Date"));
    assertEquals(EMPTY_SHA256, headers.get("x-amz-content-sha256"));
    String expected = signature(
        "host:example.amazonaws.com\nx-amz-content-sha256:" + EMPTY_SHA256 + "\nx-amz-date:20150830T123600Z\n",
        "host;x-amz-content-sha256;x-amz-date");
    assertEquals(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            + "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" + expected,
        headers.get("Authorization"));
    assertFalse(headers.containsKey("Host"), "the HTTP client sets Host itself");
  }

  @Test
  void signsTheBodyAndTheContentTypeForExecuteApi() {
    byte[] body = "{\"workerId\":\"w\"}".getBytes(StandardCharsets.UTF_8);
    Map<String, String> headers = auth("execute-api").headers(
        "POST", URI.create("https://abc.execute-api.us-east-1.amazonaws.com/prod/v1/jobs/poll"),
        Map.of("content-type", "application/json"), body);
    String authorization = headers.get("Authorization");
    assertTrue(authorization.startsWith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/execute-api/aws4_request"), authorization);
    assertTrue(authorization.contains("SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date"), authorization);
    Map<String, String> other = auth("execute-api").headers(
        "POST", URI.create("https://abc.execute-api.us-east-1.amazonaws.com/prod/v1/jobs/poll"),
        Map.of("content-type", "application/json"), "{}".getBytes(StandardCharsets.UTF_8));
    assertFalse(authorization.equals(other.get("Authorization")), "the body is signed");
  }
}
