"""The engine's public operations, one group per concern, each operation one short transaction on
the instance it touches:

- :class:`~baton.engine.definition_ops.DefinitionOps`: workflow and task definitions;
- :class:`~baton.engine.instance_ops.InstanceOps`: start, read, search, cancel, user tasks, signals;
- :class:`~baton.engine.start_batch.StartBatchOps`: many starts in one transaction;
- :class:`~baton.engine.job_ops.JobOps`: the workers' poll, complete, fail and heartbeat;
- :class:`~baton.engine.batch_ops.BatchOps`: many workers' results in one transaction;
- :class:`~baton.engine.dispatch_ops.DispatchOps`: the outbox relay and the claim by id;
- :class:`~baton.engine.duties.Duties`: the scheduled reaper and sweeper;
- :class:`~baton.engine.system_tasks.SystemTasks`: the HTTP calls of HTTP steps (system-tasks);
- :class:`~baton.engine.delete_ops.DeleteOps`: deleting a definition version, a finished instance;
- :class:`~baton.engine.conductor_ops.ConductorOps`: what Conductor's workers need besides.

They share :class:`~baton.engine.core.EngineCore` (database, settings, metrics, snapshot cache and
the decision sequence).
"""

from __future__ import annotations

from baton.engine.batch_ops import BatchOps
from baton.engine.conductor_ops import ConductorOps
from baton.engine.definition_ops import DefinitionOps
from baton.engine.delete_ops import DeleteOps
from baton.engine.dispatch_ops import DispatchOps
from baton.engine.duties import Duties
from baton.engine.start_batch import StartBatchOps
from baton.engine.system_tasks import SystemTasks


class Engine(
    DefinitionOps,
    StartBatchOps,
    DispatchOps,
    BatchOps,
    SystemTasks,
    Duties,
    DeleteOps,
    ConductorOps,
):
    """Baton's engine over one database: every public operation of the REST contract."""


__all__ = ["Engine"]
