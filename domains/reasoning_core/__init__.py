"""The reasoning-core family: every generator of the `reasoning-core` package (symbolic
logic, state tracking, formal languages, planning, tables...) as a `TextDomain`
(`domains.reasoning_core.catalogue`, built on `domains.reasoning_core.domain`)."""
