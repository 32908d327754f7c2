"""Every st.session_state key, in one place, prefixed by the page that owns it."""

SERVER = "app.server"  # name of the selected server (sidebar)
OVERVIEW_LAST_GOOD = "overview.last_good"  # {server name: last reachable ServerSnapshot}
