"""The judge as an operation: a job's configuration (spec), running it (runner: pages of pending
pairs, cache, bounded concurrency), the Batch API path (batch), job lifecycle and summaries (jobs)
and exporting judgments (export). The CLI's ``judge`` and the Judge page both call these.
"""
