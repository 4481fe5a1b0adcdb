"""The corpus definitions (``tests/conductor/corpus``) ``/api`` refuses, and why: file name → a
part of the refusal's message. One dict: a helper landing a task type removes its lines (the
corpus test fails on an entry that now registers, and on a refusal not listed here).

Every entry is a task type Baton does not translate (yet), or a definition Conductor registers
but could only fail when it runs; the comment above each group says which.
"""

from __future__ import annotations

REFUSED: dict[str, str] = {
    # PULL_WORKFLOW_MESSAGES: Conductor's workflow message queue (WMQ), a server feature Baton
    # has no counterpart of.
    "docs__wmq__wmq_echo_loop__wmq_echo_loop.json": "task type PULL_WORKFLOW_MESSAGES",
    # USER_TASK and BLOCKING_SYSTEM_TASK: system tasks Conductor's test harness defines for its
    # own tests, not types of Conductor.
    "test-harness__blocking_system_task_workflow_integration_test__"
    "test_blocking_system_task_workflow.json": "task type BLOCKING_SYSTEM_TASK",
    "test-harness__conditional_system_task_workflow_integration_test__"
    "ConditionalSystemWorkflow.json": "task type USER_TASK",
    "test-harness__rate_limited_system_task_workflow_integration_test__"
    "test_rate_limit_system_task_workflow.json": "task type USER_TASK",
    "test-harness__simple_workflow_with_async_complete_system_task_integration_test__"
    "async_complete_integration_test_wf.json": "task type USER_TASK",
    # Definitions Conductor registers but can only fail when they run (the definition of a
    # recorded execution; a kitchen-sink sample): Baton says so at registration.
    # An HTTP task with no http_request at all (Conductor fails it: "Missing HTTP request").
    "core__completed__performance_test_1.json": "an HTTP task needs inputParameters.http_request",
    "core__test__performance_test_1.json": "an HTTP task needs inputParameters.http_request",
    # A dynamic fork whose task list is the plain text "task_4.output.dynamicTasks" (no ${…}):
    # Conductor cannot read a task list from it.
    "rest__kitchensink__wf1__main_workflow.json": "inputParameters.dynamicTasks must be one",
    # A dynamic fork of INLINE tasks over forkTaskInputs (each task's script given at run time,
    # which Baton's script steps do not take); also a jq program with single-quoted strings
    # ([{id: 1, value: 'task1'}]), which jq does not parse.
    "test-harness__do_while_timeline_ui_demo__do_while_timeline_ui_demo.json": (
        "forkTaskType 'INLINE'"
    ),
}
