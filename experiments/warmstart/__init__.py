"""Warm start from earlier studies in other contexts (issue 19): leave-one-context-out on recorded tables."""
