"""Security audit: a registry of checks with IDs, collectors (artefact bundle, copy of
/etc, live host), the reachability proof over nftables rulesets, and SARIF output."""
