-- Data only. A queue-triggered instance that ended in the transaction that started it (a
-- definition of SET_VARIABLE steps only, a TERMINATE, a first step that failed) left its queue
-- task 'processing' for ever: its end's settlement ran before the task named the instance. The
-- claim now names the instance first (queue_sql.DEQUEUE_FOR_TRIGGER); this settles the tasks
-- left behind as the end of their instance would have (engine.writer.queue_outcome): completed,
-- given up (a cancelled instance) or retried (pending again, or dead at max_retries).
UPDATE queue_task q
   SET retry_count = q.retry_count + CASE WHEN i.status IN ('COMPLETED', 'CANCELLED') THEN 0
                                          ELSE 1 END,
       status = CASE WHEN i.status = 'COMPLETED' THEN 'completed'
                     WHEN i.status = 'CANCELLED' THEN 'failed'
                     WHEN q.retry_count + 1 >= q.max_retries THEN 'dead'
                     ELSE 'pending' END,
       last_error = CASE WHEN i.status = 'COMPLETED' THEN q.last_error ELSE i.reason END,
       receipt = NULL, consumer_id = NULL, visibility_expires_at = NULL, instance_id = NULL,
       completed_at = CASE WHEN i.status IN ('COMPLETED', 'CANCELLED')
                             OR q.retry_count + 1 >= q.max_retries THEN now() END,
       updated_at = now()
  FROM instance i
 WHERE q.status = 'processing' AND q.instance_id = i.id
   AND i.status NOT IN ('RUNNING', 'PAUSED');
