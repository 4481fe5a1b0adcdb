package dev.baton.conductorcheck;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.netflix.conductor.client.automator.TaskRunnerConfigurer;
import com.netflix.conductor.client.http.ConductorClient;
import com.netflix.conductor.client.http.HeaderSupplier;
import com.netflix.conductor.client.http.MetadataClient;
import com.netflix.conductor.client.http.TaskClient;
import com.netflix.conductor.client.http.WorkflowClient;
import com.netflix.conductor.client.worker.Worker;
import com.netflix.conductor.common.metadata.tasks.Task;
import com.netflix.conductor.common.metadata.tasks.TaskDef;
import com.netflix.conductor.common.metadata.tasks.TaskResult;
import com.netflix.conductor.common.metadata.workflow.StartWorkflowRequest;
import com.netflix.conductor.common.metadata.workflow.WorkflowDef;
import com.netflix.conductor.common.metadata.workflow.WorkflowTask;
import com.netflix.conductor.common.run.Workflow;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Conductor's Java client, used as its documentation shows, against Baton's {@code /api}.
 *
 * <p>Environment: {@code CONDUCTOR_SERVER_URL} (the server's {@code /api} root), {@code
 * BATON_API_KEY} (sent as {@code x-api-key} through the client's {@link HeaderSupplier}), {@code
 * CHECK_PREFIX} (names of the task and workflow definitions), {@code CHECK_TIMEOUT_SECONDS}. It
 * registers two task definitions and a two-task workflow through {@link MetadataClient}, starts it
 * through {@link WorkflowClient}, runs one {@link Worker} per task with {@link
 * TaskRunnerConfigurer} (the second fails its first attempt, so the server's retry is exercised),
 * waits for the workflow to end, and prints one JSON line with what the client read back. Exit 0
 * when the workflow completed, 1 otherwise.
 */
public final class Main {
  private static final Set<Workflow.WorkflowStatus> DONE =
      Set.of(
          Workflow.WorkflowStatus.COMPLETED,
          Workflow.WorkflowStatus.FAILED,
          Workflow.WorkflowStatus.TIMED_OUT,
          Workflow.WorkflowStatus.TERMINATED);

  private Main() {}

  public static void main(String[] args) throws Exception {
    String url = System.getenv("CONDUCTOR_SERVER_URL");
    String key = System.getenv().getOrDefault("BATON_API_KEY", "");
    String prefix = System.getenv().getOrDefault("CHECK_PREFIX", "javaclient");
    long timeoutMs =
        1000L * Long.parseLong(System.getenv().getOrDefault("CHECK_TIMEOUT_SECONDS", "120"));

    ConductorClient client =
        ConductorClient.builder().basePath(url).addHeaderSupplier(new ApiKey(key)).build();
    MetadataClient metadata = new MetadataClient(client);
    WorkflowClient workflows = new WorkflowClient(client);
    TaskClient tasks = new TaskClient(client);

    String greet = prefix + "_greet";
    String flaky = prefix + "_flaky";
    metadata.registerTaskDefs(List.of(taskDef(greet, 0), taskDef(flaky, 2)));
    WorkflowDef def = new WorkflowDef();
    def.setName(prefix + "_pipeline");
    def.setVersion(1);
    def.setSchemaVersion(2);
    def.setOwnerEmail("team@example.com");
    def.setTasks(
        List.of(
            simple(greet, "greet", Map.of("name", "${workflow.input.name}")),
            simple(flaky, "flaky", Map.of("greeting", "${greet.output.greeting}"))));
    def.setOutputParameters(
        Map.of(
            "greeting", "${greet.output.greeting}",
            "attempts", "${flaky.output.attempts}"));
    metadata.registerWorkflowDef(def);
    WorkflowDef readBack = metadata.getWorkflowDef(def.getName(), 1);

    StartWorkflowRequest start = new StartWorkflowRequest();
    start.setName(def.getName());
    start.setVersion(1);
    start.setInput(Map.of("name", "Ada"));
    String workflowId = workflows.startWorkflow(start);

    List<Worker> workers =
        List.of(
            Worker.create(
                greet,
                task -> {
                  TaskResult result = new TaskResult(task);
                  result.setStatus(TaskResult.Status.COMPLETED);
                  result.addOutputData("greeting", "Hello, " + task.getInputData().get("name"));
                  result.log("greeted");
                  return result;
                }),
            new Worker() {
              @Override
              public String getTaskDefName() {
                return flaky;
              }

              @Override
              public TaskResult execute(Task task) {
                TaskResult result = new TaskResult(task);
                if (task.getRetryCount() == 0) {
                  result.setStatus(TaskResult.Status.FAILED);
                  result.setReasonForIncompletion("first attempt fails on purpose");
                } else {
                  result.setStatus(TaskResult.Status.COMPLETED);
                  result.addOutputData("attempts", task.getRetryCount() + 1);
                }
                return result;
              }

              @Override
              public int getPollingInterval() {
                return 100;
              }
            });
    TaskRunnerConfigurer runner =
        new TaskRunnerConfigurer.Builder(tasks, workers)
            .withThreadCount(2)
            .withTaskPollTimeout(100)
            .withShutdownGracePeriodSeconds(5)
            .build();
    runner.init();

    Workflow workflow = workflows.getWorkflow(workflowId, true);
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (!DONE.contains(workflow.getStatus()) && System.currentTimeMillis() < deadline) {
      Thread.sleep(200);
      workflow = workflows.getWorkflow(workflowId, true);
    }
    runner.shutdown();

    Map<String, Object> out = new LinkedHashMap<>();
    out.put("workflowId", workflowId);
    out.put("status", String.valueOf(workflow.getStatus()));
    out.put("output", workflow.getOutput());
    out.put("registeredTasks", readBack.getTasks().size());
    List<Map<String, Object>> taskRows = new ArrayList<>();
    for (Task task : workflow.getTasks()) {
      Map<String, Object> row = new LinkedHashMap<>();
      row.put("name", task.getTaskDefName());
      row.put("status", String.valueOf(task.getStatus()));
      row.put("retryCount", task.getRetryCount());
      row.put("workerId", task.getWorkerId());
      taskRows.add(row);
    }
    out.put("tasks", taskRows);
    System.out.println(new ObjectMapper().writeValueAsString(out));
    System.exit(workflow.getStatus() == Workflow.WorkflowStatus.COMPLETED ? 0 : 1);
  }

  private static TaskDef taskDef(String name, int retries) {
    TaskDef def = new TaskDef(name);
    def.setRetryCount(retries);
    def.setRetryLogic(TaskDef.RetryLogic.FIXED);
    def.setRetryDelaySeconds(0);
    def.setResponseTimeoutSeconds(60);
    def.setTimeoutSeconds(120);
    def.setOwnerEmail("team@example.com");
    return def;
  }

  private static WorkflowTask simple(String name, String ref, Map<String, Object> input) {
    WorkflowTask task = new WorkflowTask();
    task.setName(name);
    task.setTaskReferenceName(ref);
    task.setType("SIMPLE");
    task.setInputParameters(input);
    return task;
  }

  /** Baton's API key on every request, through the client's own extension point. */
  private static final class ApiKey implements HeaderSupplier {
    private final String key;

    ApiKey(String key) {
      this.key = key;
    }

    @Override
    public void init(ConductorClient client) {}

    @Override
    public Map<String, String> get(String method, String path) {
      return key.isEmpty() ? Map.of() : Map.of("x-api-key", key);
    }
  }
}
