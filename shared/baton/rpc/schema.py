"""The message types of ``proto/workflow/v1/engine.proto``, built at import from a descriptor set
compiled from it (``engine.binpb``, made by ``make proto``; a test checks it matches the proto).

A descriptor set rather than generated ``_pb2`` modules: it is data, read by any protobuf runtime
from 4.x on (generated code pins the runtime's minor version), and it needs no lint or type-check
exemptions. The types live in a pool of their own, so they never collide with another copy of the
same file (the worker SDK ships one; the tests compile the proto too).
"""

from __future__ import annotations

import functools
from importlib import resources

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    struct_pb2,
    timestamp_pb2,
)
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message

PACKAGE = "workflow.v1"
SERVICE_NAME = f"{PACKAGE}.WorkflowEngine"
DESCRIPTOR_SET = "engine.binpb"


@functools.cache
def pool() -> descriptor_pool.DescriptorPool:
    """A pool holding the well-known types the proto imports and the proto itself."""
    files = descriptor_pb2.FileDescriptorSet.FromString(
        resources.files(__package__).joinpath(DESCRIPTOR_SET).read_bytes()
    )
    result = descriptor_pool.DescriptorPool()
    for wkt in (struct_pb2.DESCRIPTOR, timestamp_pb2.DESCRIPTOR):
        proto = descriptor_pb2.FileDescriptorProto()
        wkt.CopyToProto(proto)
        result.Add(proto)
    for file in files.file:
        if not file.name.startswith("google/protobuf/"):
            result.Add(file)
    return result


def service() -> ServiceDescriptor:
    return pool().FindServiceByName(SERVICE_NAME)


def method(name: str) -> MethodDescriptor | None:
    """An RPC of the service by its short name (``PollJobs``), or None."""
    found: MethodDescriptor | None = service().methods_by_name.get(name)
    return found


@functools.cache
def message_class(full_name: str) -> type[Message]:
    """The class of a message type of the pool (``workflow.v1.Job``)."""
    cls: type[Message] = message_factory.GetMessageClass(pool().FindMessageTypeByName(full_name))
    return cls
