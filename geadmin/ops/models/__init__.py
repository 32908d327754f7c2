"""Changes to a model, each checked against what Triton reports afterwards.

- actions.py    load, unload and reload, audited by their outcome (and what else they took down)
- apply.py      a new config.pbtxt applied without taking a serving model down: refusals, write, audit
- apply_reload.py  Triton's answer to the config an apply wrote: reload, checks, the previous file put back
- apply_result.py  what an apply returns: its outcome, the audit result of each, what serves
- apply_cut_short.py  an apply cut short: the line of a Ctrl-C / SIGTERM, the unfinished one a dead
                process left that applying the same file again finishes
- took_effect.py  did Triton load the file an apply wrote: the fields it changed, in the live config
- create.py     a new model from a template: staged directory, validation, rename into place, first load
- create_plan.py  the checks of a create before anything is written, and the plan of files they yield
- reconcile.py  the applies and creates cut short: their open `started` rows closed as `interrupted`
- leftovers.py  the staging directories and temp files a cut-short create or write left, removed
- rollout_recovery.py  fleet rollouts cut short: the lock a running one holds, the row ending a dead one
- change_plan.py  one plan of a config change for the CLI and the editor: findings, rollback
                target, impact, the question asked, a declined change audited as refused
- explained_load.py  a load followed through Triton's log, its failure explained
- preview.py    a config change served as a trial copy beside the live model, measured at the
                recorded rate: go / no-go with the evidence, nothing applied
- preview_report.py  what a preview found: both sides measured, the ensembles, the objective, the verdict
- put_back.py   the served config written back over a drifted file, audited
"""
