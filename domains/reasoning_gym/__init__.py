"""The reasoning-gym family: every generator as a `TextDomain` (`catalogue`), six with
hand-picked levels (`hand_made`), and the domain class with its verifier (`domain`)."""
