"""Shared Streamlit pieces for the pages. The core library (geadmin/) never imports these."""
