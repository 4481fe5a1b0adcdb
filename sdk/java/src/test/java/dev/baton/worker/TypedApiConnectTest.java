package dev.baton.worker;

/** Every test of {@link TypedApiTest} with the client on the Connect protocol (binary RPCs). */
class TypedApiConnectTest extends TypedApiTest {
  @Override
  Protocol protocol() {
    return Protocol.CONNECT;
  }
}
