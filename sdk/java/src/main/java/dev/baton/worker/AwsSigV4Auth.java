package dev.baton.worker;

import java.net.URI;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.http.ContentStreamProvider;
import software.amazon.awssdk.http.SdkHttpMethod;
import software.amazon.awssdk.http.SdkHttpRequest;
import software.amazon.awssdk.http.auth.aws.signer.AwsV4HttpSigner;
import software.amazon.awssdk.http.auth.spi.signer.SignedRequest;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.regions.providers.DefaultAwsRegionProviderChain;

/**
 * Signs every request with AWS Signature Version 4 (the AWS SDK for Java v2's {@link
 * AwsV4HttpSigner}), for an API Gateway whose methods use IAM authorization.
 *
 * <p>Credentials come from the SDK's default chain (environment, profile, SSO, container or
 * instance role) unless given, resolved before each request so that refreshing credentials keep
 * working. {@code service} is {@code execute-api}; the region defaults to the SDK's region chain
 * ({@code AWS_REGION}, the profile...).
 */
public final class AwsSigV4Auth implements RequestAuth {
  /** The headers the signer adds that the request carries: the rest (host) the client sets. */
  private static final Set<String> SENT =
      Set.of("authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256");

  private final AwsCredentialsProvider credentials;
  private final Region region;
  private final String service;
  private final AwsV4HttpSigner signer = AwsV4HttpSigner.create();
  private final java.time.Clock clock;

  private AwsSigV4Auth(Builder b) {
    this.credentials = b.credentials != null ? b.credentials : DefaultCredentialsProvider.builder().build();
    this.region = b.region != null ? b.region : new DefaultAwsRegionProviderChain().getRegion();
    this.service = Objects.requireNonNull(b.service, "service");
    this.clock = b.clock;
  }

  /** The default chain's credentials and region, for {@code execute-api}. */
  public static AwsSigV4Auth create() {
    return builder().build();
  }

  public static Builder builder() {
    return new Builder();
  }

  @Override
  public Map<String, String> headers(String method, URI uri, Map<String, String> headers, byte[] body) {
    SdkHttpRequest.Builder request = SdkHttpRequest.builder().uri(uri).method(SdkHttpMethod.fromValue(method));
    headers.forEach(request::putHeader);
    SignedRequest signed =
        signer.sign(
            r -> r.identity(credentials.resolveCredentials())
                .request(request.build())
                .payload(ContentStreamProvider.fromByteArrayUnsafe(body))
                .putProperty(AwsV4HttpSigner.SERVICE_SIGNING_NAME, service)
                .putProperty(AwsV4HttpSigner.REGION_NAME, region.id())
                .putProperty(AwsV4HttpSigner.SIGNING_CLOCK, clock));
    Map<String, String> added = new LinkedHashMap<>();
    for (Map.Entry<String, List<String>> e : signed.request().headers().entrySet()) {
      if (SENT.contains(e.getKey().toLowerCase(java.util.Locale.ROOT))) {
        added.put(e.getKey(), e.getValue().get(0));
      }
    }
    return added;
  }

  @Override
  public String describe() {
    return "AWS SigV4 credentials of " + credentials.getClass().getSimpleName() + " (" + service + ", " + region.id() + ")";
  }

  /** Builds an {@link AwsSigV4Auth}. */
  public static final class Builder {
    private AwsCredentialsProvider credentials;
    private Region region;
    private String service = "execute-api";
    private java.time.Clock clock = java.time.Clock.systemUTC();

    private Builder() {}

    public Builder credentials(AwsCredentialsProvider value) {
      this.credentials = value;
      return this;
    }

    public Builder region(String value) {
      this.region = Region.of(value);
      return this;
    }

    public Builder service(String value) {
      this.service = value;
      return this;
    }

    /** The signing time's clock (tests). */
    Builder clock(java.time.Clock value) {
      this.clock = value;
      return this;
    }

    public AwsSigV4Auth build() {
      return new AwsSigV4Auth(this);
    }
  }
}
