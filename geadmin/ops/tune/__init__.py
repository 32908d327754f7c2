"""The tuner: the serving config that gets a model its batching gain, found on trial copies.

- space.py      the search space and its cost model, on values only
- trials.py     trial copies made with a marker, removed only when ours; left-overs removed at start
- memory.py     the NPU memory check: a trial that would not fit is not loaded
- outcome.py    what a run asks for and produces: settings, trials, the result document
- search.py     `tune`: measure candidates on trial copies, never touching the live model
- objective.py  the objective search: the fewest instances meeting the p99 at the recorded load
- results.py    tuning runs kept in the workspace database
- apply.py      apply a run's winner on the server it was measured on
- joint.py      the joint choice: one meeting trial per model, fitting the NPU memory they share
- joint_run.py  models that share an NPU tuned in turn, chosen jointly, applied one at a time
"""
