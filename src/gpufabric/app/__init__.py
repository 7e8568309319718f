"""Application services: one typed request in, one typed outcome out, for ``cli`` and ``api``.

``requests`` declares each command's knobs once (the CLI derives its options from them);
``workloads`` is the registry of workload kinds (``workload.kind``: training, inference);
``services`` runs a plan or a simulation through it. An outcome owns its JSON document and
its exit status; printing stays in ``cli``.
"""
