"""History: reports filed over time, the steps found in them, and a dashboard of both.

    database.py   one connection to SQLite or PostgreSQL, their differences in one place
    schema.py     the tables, their version and the migrations between versions
    fingerprint.py the environment a report's figures belong to
    store.py      HistoryStore: file a report, read a suite's history back
    detect.py     step detection per case, metric and environment (docs/HISTORY.md)
    views.py      the steps as Markdown or JSON
    dashboard.py  the static site (plotly)
    commands.py   `<suite> history add|regressions|dashboard|serve`
"""
