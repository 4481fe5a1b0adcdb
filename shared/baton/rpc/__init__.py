"""The proto's ``WorkflowEngine`` service as RPC: the Connect protocol (unary, binary and JSON)
and native gRPC, both answered by the REST operations each RPC mirrors.

``schema`` loads the message types from the descriptor set compiled from ``engine.proto``;
``methods`` maps each RPC to its REST twin; ``convert`` turns messages into REST JSON and back;
``connect`` is the wire protocol (request decoding, error codes); ``bridge`` runs one call
through a REST handler and maps its answer.
"""
