"""The local runtime behind ``baton dev``: the Lambda handlers of ``functions/`` served over HTTP.

An HTTP server turns each request into an API Gateway REST (v1) proxy event and calls the route's
handler, a timer calls the scheduled handlers with EventBridge events, PostgreSQL is embedded unless
``DATABASE_URL`` points elsewhere, and S3 is moto's in-process server unless an endpoint is set.
Nothing here is imported by the engine or by the Lambda functions.
"""
