"""Services: the operations the CLI and the app share (they hold no UI and no SQL)."""
