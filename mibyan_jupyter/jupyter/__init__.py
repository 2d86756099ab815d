"""The Jupyter layer: the %%agent magic, its live view and the tools it gives the model."""
