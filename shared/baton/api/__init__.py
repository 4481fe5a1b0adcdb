"""The HTTP contract: request/response models, the error mapping, the OpenAPI document.

Pure Python: nothing here knows about Lambda or Powertools (that glue is ``baton_lambda``).
"""
