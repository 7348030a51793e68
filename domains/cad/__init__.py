"""The CAD family: parts built through a modeling API in a sandbox (`domain`), with the
kernel that runs inside the sandbox (`kernel`)."""
