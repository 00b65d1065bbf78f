# OLM bundle and kustomize deployment targets (filled in by the bundle work).
