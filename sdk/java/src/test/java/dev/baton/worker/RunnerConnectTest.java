package dev.baton.worker;

/** Every test of {@link RunnerTest} with the client on the Connect protocol (binary RPCs). */
class RunnerConnectTest extends RunnerTest {
  @Override
  Protocol protocol() {
    return Protocol.CONNECT;
  }
}
