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


def _dead_task(invoke: Invoke, queue: str, title: str) -> str:
    q = {"name": queue}
    invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/push",
        path_params=q,
        body={"title": title, "maxRetries": 1, "priority": 9},
    )
    _, _, got = invoke(
        "queues", "POST", "/v1/queues/{name}/dequeue", path_params=q, body={"consumerId": "c"}
    )
    task = got["tasks"][0]
    status, _, nacked = invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/tasks/{taskId}/nack",
        path_params={**q, "taskId": task["id"]},
        body={"receipt": task["receipt"], "error": "no luck"},
    )
    assert status == 200 and nacked["status"] == "dead"
    return str(task["id"])


def test_list_queues_tasks_and_redrive_dead_letters(invoke: Invoke) -> None:
    dead = _dead_task(invoke, "dl-q", "doomed")
    status, _, listed = invoke("queues", "GET", "/v1/queues")
    assert status == 200
    assert listed["queues"] == [
        {"name": "dl-q", "pending": 0, "processing": 0, "completed": 0, "failed": 0, "dead": 1}
    ]
    status, _, tasks = invoke(
        "queues",
        "GET",
        "/v1/queues/{name}/tasks",
        path_params={"name": "dl-q"},
        query={"status": "dead", "limit": "10"},
    )
    assert status == 200
    (task,) = tasks["tasks"]
    assert task["id"] == dead and task["lastError"] == "no luck" and task["retryCount"] == 1
    status, _, result = invoke(
        "queues", "POST", "/v1/queues/{name}/redrive", path_params={"name": "dl-q"}, body={}
    )
    assert status == 200
    assert result == {"redriven": 1, "taskIds": [dead], "skipped": [], "remaining": 0}
    status, _, again = invoke(
        "queues",
        "POST",
        "/v1/queues/{name}/redrive",
        path_params={"name": "dl-q"},
        body={"taskIds": [dead]},
    )
    assert status == 200 and again["redriven"] == 0
    assert again["skipped"] == [
        {"id": dead, "status": "pending", "reason": "the task is pending, not dead"}
    ]


def test_bad_listing_and_redrive_input_is_422_naming_the_field(invoke: Invoke) -> None:
    cases = [
        ("GET", "/v1/queues/{name}/tasks", {"query": {"status": "gone"}}, "status"),
        ("GET", "/v1/queues/{name}/tasks", {"query": {"limit": "0"}}, "limit"),
        ("GET", "/v1/queues/{name}/tasks", {"query": {"pageToken": "abc"}}, "pageToken"),
        ("GET", "/v1/queues", {"query": {"pageToken": "abc"}}, "pageToken"),
        ("POST", "/v1/queues/{name}/redrive", {"body": {"taskIds": []}}, "taskIds"),
        ("POST", "/v1/queues/{name}/redrive", {"body": {"taskIds": ["nope"]}}, "taskIds[0]"),
        ("POST", "/v1/queues/{name}/redrive", {"body": {"taskIds": "x"}}, "taskIds"),
        ("POST", "/v1/queues/{name}/redrive", {"body": {"all": True}}, "all"),
    ]
    for method, resource, kw, path in cases:
        params = {"name": "q"} if "{name}" in resource else None
        status, headers, problem = invoke("queues", method, resource, path_params=params, **kw)
        assert status == 422, (resource, kw, problem)
        assert headers["content-type"] == "application/problem+json"
        assert path in [e["path"] for e in problem["errors"]], (kw, problem)
    status, _, problem = invoke(
        "queues", "GET", "/v1/queues/{name}/tasks", path_params={"name": "bad name!"}
    )
    assert status == 422 and problem["errors"][0]["path"] == "queueName"
