"""gpufabric: plan, simulate, configure, secure and validate GPU-cluster fabrics."""

__version__ = "0.1.0"

#: Version of every machine-readable artefact gpufabric writes (JSON output, result
#: store, manifests). Bump when a key is renamed or removed; adding keys is free.
SCHEMA_VERSION = 1
