"""Rendering results: tables, JSON and CSV (``report``), plots (``plots``)."""
