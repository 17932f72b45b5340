"""The judge as an operation: a job's configuration (spec), running it (runner: pages of pending
pairs, cache, bounded concurrency), the Batch API path (batch), job lifecycle and summaries (jobs),
exporting judgments (export) and the plan of which pool pairs to judge within a budget (budget).
The CLI's ``judge`` and the Judge page both call these.
"""
