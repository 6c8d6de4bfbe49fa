"""Developer tools that are not part of the operator (``pdd_operator``) and never shipped in an image."""
