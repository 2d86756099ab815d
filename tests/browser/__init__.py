"""Browser tests (JupyterLab in Chromium): a package, so "package"-scoped fixtures end with it."""
