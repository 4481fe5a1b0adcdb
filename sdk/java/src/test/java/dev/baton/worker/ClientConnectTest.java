package dev.baton.worker;

/** Every test of {@link ClientTest} with the client on the Connect protocol (binary RPCs). */
class ClientConnectTest extends ClientTest {
  @Override
  Protocol protocol() {
    return Protocol.CONNECT;
  }
}
