"""Who may call: bearer tokens of every kind, dashboard sessions, rate limits."""
