"""Domains: the contract every domain keeps (`domains.contract`, checked by
`domains.conformance.check_domain`), the registry of all of them (`domains.registry`), the
held-out split (`domains.splits`), and one subpackage per family. Importing this package
loads nothing; the registry builds the families on first use."""
