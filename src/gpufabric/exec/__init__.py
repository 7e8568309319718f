"""Everything that starts a process: the one wrapper, the group killer, launchers.

``process`` runs tools (argv lists, new session, die-with-parent, timeouts that kill the
whole process group and keep partial output, typed errors) and probes ports;
``launchers`` is the registry of launchers (local, torchrun, slurm, mpirun, k8s) behind one
protocol and the launch record whose fields are the command line (``knobs``); ``launch``
holds the pieces they build with and runs a launch; ``k8s`` renders and follows Kubeflow
TrainJob, PyTorchJob and MPIJob manifests. Nothing outside this package
imports ``subprocess`` (tests/test_architecture.py).
"""
