from __future__ import annotations

from tests.support.lambda_events import Invoke


def test_push_dequeue_ack_stats_peek_purge(invoke: Invoke) -> None:
    status, _, pushed = invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/push",
        path_params={"name": "jobs-q"},
        body={"title": "t1", "body": "{}", "priority": 2},
    )
    assert status == 201 and pushed["status"] == "pending" and pushed["queueName"] == "jobs-q"
    invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/push",
        path_params={"name": "jobs-q"},
        body={"title": "t2"},
    )
    status, _, peek = invoke(
        "queues",
        "GET",
        "/v1/queues/{name}/peek",
        path_params={"name": "jobs-q"},
        query={"limit": "1"},
    )
    assert status == 200 and [t["title"] for t in peek["tasks"]] == ["t1"]
    status, _, got = invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/dequeue",
        path_params={"name": "jobs-q"},
        body={"consumerId": "c1"},
    )
    task = got["tasks"][0]
    assert status == 200 and task["title"] == "t1" and task["receipt"]
    status, _, acked = invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/tasks/{taskId}/ack",
        path_params={"name": "jobs-q", "taskId": task["id"]},
        body={"receipt": task["receipt"]},
    )
    assert status == 200 and acked["status"] == "completed"
    status, _, stats = invoke(
        "queues", "GET", "/v1/queues/{name}/stats", path_params={"name": "jobs-q"}
    )
    assert stats == {"pending": 1, "processing": 0, "completed": 1, "failed": 0, "dead": 0}
    status, _, purged = invoke(
        "queues", "DELETE", "/v1/queues/{name}", path_params={"name": "jobs-q"}
    )
    assert (status, purged) == (200, {"deleted": 2})


def test_bad_queue_requests_are_problems(invoke: Invoke) -> None:
    status, _, body = invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/push",
        path_params={"name": "bad_name"},
        body={"title": "t"},
    )
    assert status == 422 and "letters, digits and hyphens" in body["detail"]
    status, _, body = invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/push",
        path_params={"name": "q"},
        body={"body": "no title"},
    )
    assert status == 422 and [e["path"] for e in body["errors"]] == ["title"]
    status, _, body = invoke(
        "queues", "GET", "/v1/queues/{name}/peek", path_params={"name": "q"}, query={"limit": "500"}
    )
    assert status == 422
    invoke(
        "queues", "POST", "/v1/queues/{name}/push", path_params={"name": "q"}, body={"title": "t"}
    )
    _, _, got = invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/dequeue",
        path_params={"name": "q"},
        body={"consumerId": "c"},
    )
    status, _, body = invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/tasks/{taskId}/nack",
        path_params={"name": "q", "taskId": got["tasks"][0]["id"]},
        body={"receipt": "00000000-0000-0000-0000-000000000000"},
    )
    assert status == 409


def test_push_nudges_a_queue_trigger(invoke: Invoke) -> None:
    definition = {
        "name": "on-push",
        "steps": [{"id": "s", "type": "SERVICE_TASK", "jobType": "pushed"}],
        "trigger": {"type": "queue", "queueName": "inbox"},
    }
    assert invoke("definitions", "POST", "/v1/definitions", body=definition)[0] == 201
    invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/push",
        path_params={"name": "inbox"},
        body={"title": "hello"},
    )
    _, _, polled = invoke(
        "jobs", "POST", "/v1/jobs/poll", body={"workerId": "w", "jobTypes": ["pushed"]}
    )
    assert len(polled["jobs"]) == 1  # started by the push itself, not by a later tick
