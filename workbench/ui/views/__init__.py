"""Pages of the app; each is thin and calls workbench.services."""
