"""Everything that starts a process: the one wrapper, the group killer, launchers.

``process`` runs tools (argv lists, new session, die-with-parent, timeouts that kill the
whole process group and keep partial output, typed errors) and probes ports; ``launch``
turns a rank layout into local, torchrun, mpirun, srun or sbatch commands and runs them;
``k8s`` renders and applies Kubeflow TrainJob manifests. Nothing outside this package
imports ``subprocess`` (tests/test_architecture.py).
"""
