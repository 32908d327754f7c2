"""Everything that changes or exercises a server: model actions, the diagnostics bundle."""
