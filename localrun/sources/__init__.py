"""Lambda's event source mappings and EventBridge schedules: the DynamoDB Streams reader and
poller (batches, bisection, on-failure records), the SQS poller, partial batch responses, and
the scheduler.
"""
