"""Reports across tickets: outstanding dollars by stage and age, digests, share links, backup packages."""
