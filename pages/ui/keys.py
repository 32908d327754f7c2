"""Every st.session_state key, in one place, prefixed by the page that owns it."""

SERVER = "app.server"  # name of the selected server (sidebar)
OVERVIEW_LAST_GOOD = "overview.last_good"  # {server name: last reachable ServerSnapshot}
OVERVIEW_LOG_VERBOSE = "overview.log_verbose"  # verbose level to apply
OVERVIEW_LOG_APPLY = "overview.log_apply"  # the apply button
OVERVIEW_RETRY_PREFIX = "overview.retry."  # + "name.version": the "Retry load" button
OVERVIEW_RETRY_RESULT = "overview.retry_result"  # ActionResult of the last retry, shown once
MODELS_LAST_GOOD = "models.last_good"  # {server name: last model rows read}
MODELS_SEARCH = "models.search"  # table search text
MODELS_STATES = "models.states"  # table state filter
MODELS_SELECTED = "models.selected"  # names the action applies to
MODELS_ACTION = "models.action"  # load / unload / reload
MODELS_DEPENDENTS = "models.dependents"  # unload with dependents
MODELS_PENDING = "models.pending"  # (server, action, names, dependents) awaiting confirmation
MODELS_RESULTS = "models.results"  # ActionResults of the last action, shown once
MODELS_DETAIL = "models.detail"  # model shown in the detail view
OVERVIEW_BUNDLE_PREPARE = "overview.bundle_prepare"  # the "Prepare bundle" button
OVERVIEW_BUNDLE = "overview.bundle"  # (file name, archive bytes, problems) ready to download
OVERVIEW_BUNDLE_DOWNLOAD = "overview.bundle_download"  # the download button
MODELS_PAUSED = "models.paused"  # auto-refresh of the table paused
MODELS_SHAPE = "models.shape"  # (server, fresh, names) the last full run was drawn for
