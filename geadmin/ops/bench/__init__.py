"""Load tests with perf_analyzer (from the tritonclient wheel) against one model.

- params.py     what a load test may ask for (loads, window, trials) and one test per server at a time
- intervals.py  recorded inter-arrival intervals as perf_analyzer's --request-intervals file
- load_test.py  the one loop the Load test page and `geadmin bench` share
- invocation.py one perf_analyzer process: deadline, cancel, progress, and the points of its report
- failures.py   how a load test fails: one table from perf_analyzer's words to a geadmin error
- results.py    what a load test measured, parsed from perf_analyzer's CSV, kept in the workspace
- compare.py    which two saved load tests to compare, and their chart labels
- background.py a load test as a background run (geadmin.ops.runs) for the Load test page
"""
